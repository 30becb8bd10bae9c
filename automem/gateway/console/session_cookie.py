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
* Logout adds the session id to this process's :class:`EndedSessions`: the same gateway
  process refuses the cookie from then on; another replica accepts a copy of it until it
  expires (nothing is shared between replicas).
"""

from __future__ import annotations

import base64
import json
import secrets
import time
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
    """Session ids logged out in this process, each kept until its session would have
    expired anyway; at most ``capacity`` (when full, the one that expires first goes)."""

    def __init__(self, capacity: int, lifetime: int, clock: Callable[[], float] = time.time) -> None:
        """``capacity``: ids kept at most (>= 1); ``lifetime``: a session's seconds; ValueError
        naming either when not positive."""
        if capacity < 1:
            raise ValueError("capacity: must be at least 1")
        if lifetime <= 0:
            raise ValueError("lifetime: must be positive")
        self.capacity, self.lifetime, self.clock = capacity, lifetime, clock
        self._ended: dict[str, float] = {}  # session id -> when its session expires (Unix seconds)

    def __len__(self) -> int:
        return len(self._ended)

    def end(self, opened: Opened) -> None:
        """Refuse ``opened``'s session from now on (in this process)."""
        now = self.clock()
        expiry = opened.logged_in_at + self.lifetime
        if expiry <= now:
            return  # expired: refused already
        if opened.session_id not in self._ended and len(self._ended) >= self.capacity:
            self._ended = {sid: e for sid, e in self._ended.items() if e > now}
            while len(self._ended) >= self.capacity:
                del self._ended[min(self._ended, key=self._ended.__getitem__)]
        self._ended[opened.session_id] = expiry

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._ended
