"""The console's session cookie (automem/gateway/console/session_cookie.py): the API key
sealed with Fernet under a key derived from AUTOMEM_CONSOLE_SECRET; any process with the same
secret opens it, none other does, and it expires with the session. The cookie held the raw
key before (a copy of it was the key)."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.fernet import Fernet
from pydantic import ValidationError

from automem.common.settings import Settings
from automem.gateway.console.session_cookie import EndedSessions, Opened, SessionCodec, fernet_key

SECRET = "s" * 32
OTHER = "t" * 40
KEY = "am_0a1b2c_s3cr3tpart"
LIFETIME = 8 * 3600


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_sealed_cookie_holds_no_key_and_opens_to_the_key_session_and_login_time() -> None:
    clock = Clock()
    codec = SessionCodec(SECRET, LIFETIME, clock)
    token = codec.seal(KEY)
    assert "s3cr3tpart" not in token and KEY not in token
    assert b"s3cr3tpart" not in base64.urlsafe_b64decode(token + "==")
    opened = codec.open(token)
    assert opened is not None and opened.key == KEY and opened.logged_in_at == int(clock.now)
    assert len(opened.session_id) >= 20
    assert codec.open(codec.seal(KEY)).session_id != opened.session_id  # type: ignore[union-attr]


def test_gateways_sharing_the_secret_open_each_others_cookies_and_others_do_not() -> None:
    """Two gateway replicas (two codecs built apart) with one AUTOMEM_CONSOLE_SECRET: a cookie
    sealed by either opens on the other; a gateway with another secret refuses it."""
    first, second = SessionCodec(SECRET, LIFETIME), SessionCodec(SECRET, LIFETIME)
    assert second.open(first.seal(KEY)).key == KEY  # type: ignore[union-attr]
    assert first.open(second.seal(KEY)).key == KEY  # type: ignore[union-attr]
    assert SessionCodec(OTHER, LIFETIME).open(first.seal(KEY)) is None


def test_an_altered_cookie_opens_to_nothing() -> None:
    codec = SessionCodec(SECRET, LIFETIME)
    token = codec.seal(KEY)
    raw = bytearray(base64.urlsafe_b64decode(token))
    raw[30] ^= 1  # a bit of the ciphertext
    assert codec.open(base64.urlsafe_b64encode(bytes(raw)).decode()) is None
    swapped = token[:40] + ("B" if token[40] == "A" else "A") + token[41:]
    for bad in ("", KEY, token[:-4], swapped, "é" * 10, "A" * 5000):
        assert codec.open(bad) is None, bad


def test_a_cookie_older_than_the_session_opens_to_nothing() -> None:
    """A token stamped (Fernet.encrypt_at_time) longer ago than the session lasts is refused,
    whatever Max-Age the browser kept."""
    clock = Clock()
    codec = SessionCodec(SECRET, LIFETIME, clock)
    fernet = Fernet(fernet_key(SECRET))
    payload = json.dumps({"k": KEY, "sid": "old-session"}).encode()
    old = fernet.encrypt_at_time(payload, int(clock.now) - LIFETIME - 1).decode()
    assert codec.open(old) is None
    recent = fernet.encrypt_at_time(payload, int(clock.now) - LIFETIME + 60).decode()
    assert codec.open(recent) == Opened(KEY, "old-session", int(clock.now) - LIFETIME + 60)
    token = codec.seal(KEY)
    clock.now += LIFETIME + 1
    assert codec.open(token) is None


def test_a_token_sealed_with_the_derived_key_but_not_a_session_opens_to_nothing() -> None:
    fernet = Fernet(fernet_key(SECRET))
    codec = SessionCodec(SECRET, LIFETIME)
    for payload in (b"not json", b"[1]", b'{"k": 1, "sid": "x"}', b'{"k": "am_x_y"}', b"\xff"):
        assert codec.open(fernet.encrypt(payload).decode()) is None, payload


def test_any_secret_length_from_32_works_and_a_shorter_one_is_refused_naming_the_variable() -> None:
    for secret in ("x" * 32, "y" * 33, "z" * 500, "é" * 32):
        codec = SessionCodec(secret, LIFETIME)
        assert codec.open(codec.seal(KEY)).key == KEY  # type: ignore[union-attr]
    with pytest.raises(ValueError, match=r"AUTOMEM_CONSOLE_SECRET: at least 32 characters \(got 31\)"):
        SessionCodec("x" * 31, LIFETIME)
    with pytest.raises(ValidationError, match="AUTOMEM_CONSOLE_SECRET") as caught:
        Settings(AUTOMEM_CONSOLE_SECRET="short")  # type: ignore[call-arg]
    assert "at least 32 characters" in str(caught.value)
    assert Settings(AUTOMEM_CONSOLE_SECRET="").console_secret == ""  # type: ignore[call-arg]


def test_ended_sessions_are_refused_until_they_would_expire_and_stay_bounded() -> None:
    clock = Clock()
    ended = EndedSessions(3, LIFETIME, clock)
    login = int(clock.now)
    ended.end(Opened(KEY, "a", login))
    assert ended.ended(Opened(KEY, "a", login)) and not ended.ended(Opened(KEY, "b", login))
    ended.end(Opened(KEY, "expired", login - LIFETIME))
    assert not ended.ended(Opened(KEY, "expired", login - LIFETIME)) and len(ended) == 1
    ended.end(Opened("other", "b", login + 10))
    ended.end(Opened("third", "c", login + 20))
    assert len(ended) == 3
    clock.now += LIFETIME + 15  # a and b have expired: they make room
    ended.end(Opened("fourth", "d", int(clock.now)))
    assert set(ended._ids) == {"c", "d"} and len(ended) == 2
    with pytest.raises(ValueError, match="capacity"):
        EndedSessions(0, LIFETIME)
    with pytest.raises(ValueError, match="lifetime"):
        SessionCodec(SECRET, 0)


def test_logging_out_past_the_capacity_never_revives_an_ended_session() -> None:
    """The set held at most 10,000 ids and dropped the one expiring first when full: a user
    logging out 10,000 times revived a stolen copy of an earlier session's cookie until its
    8 h end. Full of unexpired ids, a logout folds its key's ids into a bound ("sessions of
    this key logged in at or before T are ended"), and when no key has ids to spare, all of
    them into one process-wide bound: memory stays within the capacity and every ended
    session stays ended until it expires."""
    clock = Clock()
    ended = EndedSessions(3, LIFETIME, clock)
    login = int(clock.now)
    stolen = Opened(KEY, "stolen", login)
    ended.end(stolen)
    other_user = Opened("other-key", "other", login)
    live_of_other = Opened("other-key", "still-live", login)
    ended.end(other_user)
    later = []
    for i in range(10):  # the same user logs out again and again
        clock.now += 1
        later.append(Opened(KEY, f"s{i}", int(clock.now)))
        ended.end(later[-1])
        assert len(ended) <= 3
        assert all(ended.ended(o) for o in (stolen, other_user, *later)), i
    assert not ended.ended(live_of_other)  # another key's sessions are not touched
    assert not ended.ended(Opened(KEY, "new-login", int(clock.now) + 1))  # a later login works
    # Three keys, one id each, and a fourth: no key has two ids, all fold into one bound.
    crowded = EndedSessions(3, LIFETIME, clock)
    sessions = [Opened(f"key{i}", f"sid{i}", int(clock.now) - 10 + i) for i in range(4)]
    for opened in sessions:
        crowded.end(opened)
    assert len(crowded) <= 3 and all(crowded.ended(o) for o in sessions)
    assert not crowded.ended(Opened("key9", "fresh", int(clock.now) + 1))
    clock.now += LIFETIME + 1  # every bound's sessions have expired: the bounds go
    crowded.end(Opened("key5", "next", int(clock.now)))
    assert len(crowded) == 1 and crowded._all is None
