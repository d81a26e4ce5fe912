"""The Logon's secrets overwritten in quickfix's files, in place (adapters/venues/fix/session.py, `redact`):
every Password(554) and NewPassword(925) value, whatever the file's size, and nothing else."""

from __future__ import annotations

from foxhunt.adapters.venues.fix import session
from foxhunt.adapters.venues.fix.session import redact

SOH = b"\x01"


def logon(seq: int, password: bytes) -> bytes:
    return (b"20261202-10:00:00.000 : 8=FIX.4.4" + SOH + b"9=70" + SOH + b"35=A" + SOH + b"34=" + str(seq).encode()
            + SOH + b"553=desk" + SOH + b"554=" + password + SOH + b"10=000" + SOH + b"\n")


def order(seq: int) -> bytes:
    return b"20261202-10:00:01.000 : 8=FIX.4.4" + SOH + b"35=D" + SOH + b"34=" + str(seq).encode() + SOH + b"5540=7" \
        + SOH + b"11=x-554=y" + SOH + b"10=000" + SOH + b"\n"


def test_every_password_and_new_password_is_overwritten_with_as_many_asterisks_and_nothing_else(tmp_path):
    path = tmp_path / "FIX.4.4-A-B.messages.current.log"
    text = logon(1, b"s3cret") + order(2) + logon(3, b"n3w-s3cret") + b"x" + SOH + b"925=n3w" + SOH + b"\n"
    path.write_bytes(text)
    assert redact(path) == 3
    after = path.read_bytes()
    assert len(after) == len(text) and b"s3cret" not in after and b"n3w" not in after
    assert after.startswith(logon(1, b"******")) and logon(3, b"**********") in after
    assert order(2) in after  # 5540=7 and a ClOrdID holding "554=" are not passwords
    assert redact(path) == 0  # asterisks are left as they are


def test_a_password_across_the_boundary_of_two_chunks_or_at_the_end_of_a_cut_file(tmp_path, monkeypatch):
    monkeypatch.setattr(session, "_CHUNK", 64)
    monkeypatch.setattr(session, "_OVERLAP", 24)
    path = tmp_path / "store.body"
    lines = b"".join(order(i) if i % 3 else logon(i, b"pw%03d" % i) for i in range(60))
    cut = lines + b"8=FIX.4.4" + SOH + b"35=A" + SOH + b"554=killed-mid-write"  # a line a killed process left
    path.write_bytes(cut)
    assert redact(path) == 21
    after = path.read_bytes()
    assert len(after) == len(cut) and b"pw0" not in after and b"killed" not in after


def test_a_logons_redaction_reads_only_the_end_of_each_file(tmp_path):
    path = tmp_path / "FIX.4.4-A-B.messages.current.log"
    early = logon(1, b"old-s3cret")
    path.write_bytes(early + order(2) * 100 + logon(102, b"s3cret"))
    assert redact(path, tail_bytes=len(logon(102, b"s3cret")) + 10) == 1
    after = path.read_bytes()
    assert b"old-s3cret" in after and b"554=******" + SOH in after  # the start's own pass takes the rest
