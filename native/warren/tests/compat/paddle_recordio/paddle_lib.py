"""Drive PaddlePaddle's own RecordIO code: librecordio.so from the `recordio` wheel on PyPI,
which PaddlePaddle built from its Go package (github.com/PaddlePaddle/recordio, c/crecordio.go)
with `go build -buildmode=c-shared`. Only its C API is used, through ctypes.

    python3 paddle_lib.py LIB write FRAMES OUT   # Paddle's writer: Snappy, 32 MiB chunks
    python3 paddle_lib.py LIB read IN FRAMES     # Paddle's scanner

FRAMES files hold records as a little-endian uint32 length followed by the bytes. The C API
reports end of file and errors alike (-1 from recordio_read), so the test compares record
counts and bytes, not just the exit code.
"""
import ctypes
import struct
import sys


def load(path):
    lib = ctypes.cdll.LoadLibrary(path)
    lib.create_recordio_writer.argtypes = [ctypes.c_char_p]
    lib.create_recordio_writer.restype = ctypes.c_int
    lib.recordio_write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.recordio_write.restype = ctypes.c_int
    lib.release_recordio_writer.argtypes = [ctypes.c_int]
    lib.create_recordio_reader.argtypes = [ctypes.c_char_p]
    lib.create_recordio_reader.restype = ctypes.c_int
    lib.recordio_read.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    lib.recordio_read.restype = ctypes.c_int
    lib.release_recordio_reader.argtypes = [ctypes.c_int]
    lib.mem_free.argtypes = [ctypes.c_void_p]
    return lib


def read_frames(path):
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        out.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return out


def write(lib, frames, out):
    w = lib.create_recordio_writer(out.encode())
    if w < 0:
        sys.exit("paddle_lib: create_recordio_writer failed")
    for rec in read_frames(frames):
        if lib.recordio_write(w, rec, len(rec)) != len(rec):
            sys.exit("paddle_lib: recordio_write failed")
    lib.release_recordio_writer(w)


def read(lib, path, frames):
    r = lib.create_recordio_reader(path.encode())
    if r < 0:
        sys.exit("paddle_lib: create_recordio_reader failed")
    with open(frames, "wb") as f:
        p = ctypes.c_void_p()
        while True:
            n = lib.recordio_read(r, ctypes.byref(p))
            if n < 0:
                break
            rec = ctypes.string_at(p, n) if n > 0 else b""
            if n > 0:
                lib.mem_free(p)
            f.write(struct.pack("<I", len(rec)) + rec)
    lib.release_recordio_reader(r)


def main():
    if len(sys.argv) != 5 or sys.argv[2] not in ("write", "read"):
        sys.exit(__doc__)
    lib = load(sys.argv[1])
    (write if sys.argv[2] == "write" else read)(lib, sys.argv[3], sys.argv[4])


if __name__ == "__main__":
    main()
