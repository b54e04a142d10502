"""The seal cleave-compile puts on a program file (runtime/ProgramSeal.h),
for the tests that write or rewrite programs in Python: fields 50
(compile_fingerprint) and 51 (sha256) appended as the file's last bytes."""
import hashlib


def _varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number, value):
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def fingerprint(bodies):
    """The compile fingerprint of the ranks' unsealed programs, in rank order."""
    h = hashlib.sha256()
    for body in bodies:
        h.update(hashlib.sha256(body).hexdigest().encode())
    return h.hexdigest()


def seal(body, compile_fingerprint):
    """`body` (a serialized Program without fields 50 and 51), sealed."""
    sealed = body + _field(50, compile_fingerprint.encode())
    return sealed + _field(51, hashlib.sha256(sealed).hexdigest().encode())


def unsealed(program):
    """A parsed Program's bytes without its seal (a copy is changed)."""
    p = type(program)()
    p.CopyFrom(program)
    p.ClearField("compile_fingerprint")
    p.ClearField("sha256")
    return p.SerializeToString()
