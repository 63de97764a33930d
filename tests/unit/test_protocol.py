"""The evaluation protocol's frames: round trip, and caps enforced before anything is allocated."""

from __future__ import annotations

import os
import struct
import threading

import pytest

from contextevolve.evaluation import protocol


def _pipe_with(data: bytes) -> int:
    read_end, write_end = os.pipe()

    def feed():
        try:
            protocol.write_all(write_end, data)
        finally:
            os.close(write_end)

    threading.Thread(target=feed, daemon=True).start()
    return read_end


def test_frames_round_trip_with_blobs():
    frame = protocol.encode_frame({"type": "result", "value": [1, "a"]},
                                  {"mask.npy": b"\x00" * 100_000, "w": b""})
    fd = _pipe_with(frame + frame)
    for _ in range(2):
        header, blobs = protocol.read_frame(fd, max_header=1000, max_blobs=200_000)
        assert header["type"] == "result" and header["value"] == [1, "a"]
        assert blobs == {"mask.npy": b"\x00" * 100_000, "w": b""}
    with pytest.raises(EOFError):
        protocol.read_frame(fd, max_header=1000, max_blobs=10)
    os.close(fd)


@pytest.mark.parametrize("data, fragment", [
    (struct.pack(">Q", 2**40), "exceeds the 1000-byte cap"),
    (struct.pack(">Q", 5) + b"[1,2]", "not a JSON object"),
    (struct.pack(">Q", 3) + b"{x}", "not JSON"),
    (struct.pack(">Q", 12) + b'{"v": NaN}  ', "non-finite number NaN"),
    (struct.pack(">Q", 30) + b"{}", "stream ended"),
    (protocol.encode_frame({"type": "x"}, {"a": b"1" * 600}), "more than the 500-byte cap"),
    (struct.pack(">Q", 25) + b'{"blobs": [["a", -1]]}   ', "malformed blob list"),
])
def test_malformed_or_oversized_frames_are_refused(data, fragment):
    fd = _pipe_with(data)
    with pytest.raises(protocol.ProtocolError, match=fragment):
        protocol.read_frame(fd, max_header=1000, max_blobs=500)
    os.close(fd)


def test_non_finite_numbers_cannot_be_sent():
    with pytest.raises(ValueError):
        protocol.encode_frame({"value": float("nan")})


def test_overflowing_and_deeply_nested_numbers_are_refused():
    for body in (b'{"v": 1e999}', b'{"v": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"):
        fd = _pipe_with(struct.pack(">Q", len(body)) + body)
        with pytest.raises(protocol.ProtocolError):
            protocol.read_frame(fd, max_header=1 << 20, max_blobs=0)
        os.close(fd)


def test_raised_limits_come_from_the_exception_not_its_text():
    import errno

    from contextevolve.evaluation.limits import SandboxLimits
    from contextevolve.evaluation.report import resource_reason as _resource_reason

    assert protocol.raised_limit(MemoryError()) == "memory"
    assert protocol.raised_limit(OSError(errno.EFBIG, "File too large")) == "file_size"
    # a candidate's own message that merely mentions a limit is not a limit
    assert protocol.raised_limit(ValueError("MemoryError: [Errno 27] File too large")) is None
    assert protocol.raised_limit(OSError(errno.ENOSPC, "No space left on device")) is None
    limits = SandboxLimits(memory_mb=512, files_mb=8)
    assert _resource_reason("ValueError: MemoryError", None, limits) == "ValueError: MemoryError"
    assert _resource_reason("MemoryError: ", "memory", limits).startswith("memory limit of 512 MiB exceeded")
    assert _resource_reason("OSError: [Errno 27]", "file_size", limits).startswith("file-size limit of 8 MiB")
