"""The console's session cookie: the API key sealed (encrypted and authenticated) with
Fernet, so the browser holds no usable key. The cookie held the raw key before: a copy of
it (a proxy log, a shared browser profile) was the key itself, good on REST and gRPC for as
long as the key lived.

* A token is Fernet (AES-128-CBC with HMAC-SHA256, the ``cryptography`` package) over
  ``{"k": <key>, "sid": <session id>}``; Fernet stamps it with the login time. The session
  id is 16 random bytes (URL-safe base64).
* The Fernet key is HKDF-SHA256 of ``AUTOMEM_CONSOLE_SECRET`` (any length of at least
  :data:`MIN_SECRET_LENGTH` characters), so every gateway given the same secret opens the
  others' cookies (replicas behind one Service: a browser's requests may reach any of them).
  Without the setting each gateway process draws a random secret: its sessions end when it
  restarts, and another process refuses them.
* A token older than the session's lifetime, altered, or sealed with another secret opens
  to nothing (the console sends the browser to its login page).
* Logout (and a new login in the same browser, for the session its old cookie carried) adds
  the session to this process's :class:`EndedSessions`: the same gateway process refuses the
  cookie from then on until it expires, however many sessions are ended after it; another
  replica accepts a copy of it until it expires (nothing is shared between replicas).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from automem.common.settings import CONSOLE_SECRET_MIN_LENGTH

#: Shortest ``AUTOMEM_CONSOLE_SECRET`` accepted (characters).
MIN_SECRET_LENGTH = CONSOLE_SECRET_MIN_LENGTH
#: HKDF's ``info``: the derived key serves this cookie only (a new format gets a new label).
KDF_INFO = b"automem console session cookie v1"
#: Longest cookie value opened at all (a 1 KiB key seals to about 1.5 KiB).
MAX_TOKEN_LENGTH = 4096


@dataclass(frozen=True)
class Opened:
    """What a valid session cookie holds: the API key, the session id, and the login time
    (Unix seconds, the token's Fernet timestamp)."""

    key: str
    session_id: str
    logged_in_at: int


def fernet_key(secret: str) -> bytes:
    """The Fernet key (32 bytes, URL-safe base64) derived from ``secret`` with HKDF-SHA256.
    ValueError naming ``AUTOMEM_CONSOLE_SECRET`` when ``secret`` is shorter than
    :data:`MIN_SECRET_LENGTH` characters."""
    if len(secret) < MIN_SECRET_LENGTH:
        raise ValueError(f"AUTOMEM_CONSOLE_SECRET: at least {MIN_SECRET_LENGTH} characters "
                         f"(got {len(secret)})")
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=KDF_INFO).derive(secret.encode())
    return base64.urlsafe_b64encode(derived)


class SessionCodec:
    """Seals an API key into a session cookie and opens it again (stateless: any process
    built with the same secret opens it)."""

    def __init__(self, secret: str, lifetime: int, clock: Callable[[], float] = time.time) -> None:
        """``secret``: ``AUTOMEM_CONSOLE_SECRET`` (ValueError naming it when shorter than
        :data:`MIN_SECRET_LENGTH`); ``lifetime``: seconds a session lasts from login (> 0,
        ValueError naming it otherwise); ``clock``: Unix seconds (tests pass their own)."""
        if lifetime <= 0:
            raise ValueError("lifetime: must be positive")
        self._fernet = Fernet(fernet_key(secret))
        self.lifetime = lifetime
        self.clock = clock

    def seal(self, key: str) -> str:
        """A new session's cookie value for ``key`` (URL-safe base64 text; a new random
        session id, stamped with the current time)."""
        payload = json.dumps({"k": key, "sid": secrets.token_urlsafe(16)}, separators=(",", ":"))
        return self._fernet.encrypt_at_time(payload.encode(), int(self.clock())).decode("ascii")

    def open(self, token: str) -> Opened | None:
        """What the cookie value ``token`` holds; None when it is empty, oversized, not
        sealed with this secret, altered, or older than the lifetime."""
        if not token or len(token) > MAX_TOKEN_LENGTH:
            return None
        try:
            raw = token.encode("ascii")
            now = int(self.clock())
            payload = json.loads(self._fernet.decrypt_at_time(raw, self.lifetime, now))
            logged_in_at = self._fernet.extract_timestamp(raw)
        except (InvalidToken, ValueError):  # ValueError: not ASCII, not JSON
            return None
        if not isinstance(payload, dict) or not isinstance(payload.get("k"), str) \
                or not isinstance(payload.get("sid"), str):
            return None
        return Opened(payload["k"], payload["sid"], logged_in_at)


class EndedSessions:
    """Sessions logged out in this process: :meth:`ended` is true for each of them from its
    logout until it would have expired anyway (then :class:`SessionCodec` refuses the cookie
    by its age), whatever is ended in between. Nothing is evicted early: an entry goes only
    once every session it ends has expired, so a user logging out over and over cannot push
    an earlier logout out and revive its cookie (the oldest id was dropped when 10,000 were
    held, and a stolen copy of that cookie worked again).

    Memory stays bounded: at most ``capacity`` entries, each a session id or a per-key bound.
    A logout that finds the set full of unexpired entries first drops the expired ones; when
    none are, it folds the ended ids of the logging-out key (and its own) into one per-key
    bound "this key's sessions that logged in at or before T are ended" (T: the latest login
    among them, Unix seconds). That also ends the key's other sessions logged in by T (in
    this process): more is ended than asked, never less. When that leaves no room (the key
    had no ids to fold), the key with the most ids is folded too; when no key has two, every
    entry is folded into one process-wide bound: every session logged in at or before the
    latest of them is ended, and its user logs in again. Keys are held as a keyed hash
    (BLAKE2b under a random salt of this process), not as the key.
    """

    def __init__(self, capacity: int, lifetime: int, clock: Callable[[], float] = time.time) -> None:
        """``capacity``: entries kept at most (>= 1); ``lifetime``: a session's seconds; ValueError
        naming either when not positive; ``clock``: Unix seconds (tests pass their own)."""
        if capacity < 1:
            raise ValueError("capacity: must be at least 1")
        if lifetime <= 0:
            raise ValueError("lifetime: must be positive")
        self.capacity, self.lifetime, self.clock = capacity, lifetime, clock
        self._salt = secrets.token_bytes(16)
        self._ids: dict[str, tuple[bytes, int]] = {}  # session id -> (key hash, login time)
        self._keys: dict[bytes, int] = {}  # key hash -> latest login time its bound ends
        self._all: int | None = None  # every session logged in at or before this is ended

    def __len__(self) -> int:
        """Entries held: session ids plus per-key bounds (at most ``capacity``)."""
        return len(self._ids) + len(self._keys)

    def _key_hash(self, key: str) -> bytes:
        return hashlib.blake2b(key.encode(), key=self._salt, digest_size=16).digest()

    def ended(self, opened: Opened) -> bool:
        """True when ``opened``'s session was logged out in this process (by its id, its
        key's bound or the process-wide bound)."""
        if opened.session_id in self._ids:
            return True
        if self._all is not None and opened.logged_in_at <= self._all:
            return True
        bound = self._keys.get(self._key_hash(opened.key)) if self._keys else None
        return bound is not None and opened.logged_in_at <= bound

    def end(self, opened: Opened) -> None:
        """Refuse ``opened``'s session from now on (in this process) until it expires."""
        now = self.clock()
        if opened.logged_in_at + self.lifetime <= now or self.ended(opened):
            return  # expired (refused already) or ended already
        key = self._key_hash(opened.key)
        if len(self) >= self.capacity or self._all is not None:
            self._drop_expired(now)
        if len(self) < self.capacity:
            self._ids[opened.session_id] = (key, opened.logged_in_at)
            return
        self._fold(key, opened.logged_in_at)
        if len(self) <= self.capacity:
            return
        counts = Counter(k for k, _ in self._ids.values())
        if counts and (most := counts.most_common(1)[0])[1] >= 2:
            self._fold(most[0])
        else:
            self._fold_all()

    def _drop_expired(self, now: float) -> None:
        """Forget entries whose every session has expired."""
        self._ids = {sid: v for sid, v in self._ids.items() if v[1] + self.lifetime > now}
        self._keys = {k: t for k, t in self._keys.items() if t + self.lifetime > now}
        if self._all is not None and self._all + self.lifetime <= now:
            self._all = None

    def _fold(self, key: bytes, login: int | None = None) -> None:
        """Replace the ids of ``key`` (and a session of it that logged in at ``login``) by
        one bound: its sessions logged in at or before the latest of them are ended."""
        times = [t for k, t in self._ids.values() if k == key]
        self._ids = {sid: v for sid, v in self._ids.items() if v[0] != key}
        times += [t for t in (self._keys.get(key), login) if t is not None]
        self._keys[key] = max(times)

    def _fold_all(self) -> None:
        """Replace every entry by one process-wide bound (the latest login among them)."""
        times = [t for _, t in self._ids.values()] + list(self._keys.values())
        if self._all is not None:
            times.append(self._all)
        self._ids, self._keys = {}, {}
        self._all = max(times) if times else self._all
