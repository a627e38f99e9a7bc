// Command paddle_recordio_compat writes and reads PaddlePaddle RecordIO files with the same Go
// libraries PaddlePaddle's Go package uses for each chunk: hash/crc32 (IEEE) over the
// compressed payload, github.com/golang/snappy's framing-format stream writer and reader
// (snappy.NewBufferedWriter / snappy.NewReader), and compress/gzip.
//
// It is an independent implementation of the format written for Warren's compatibility
// test (see README.md for why it does not import github.com/PaddlePaddle/recordio).
//
// Records are exchanged with the test as "frames files": each record as a little-endian
// uint32 length followed by its bytes.
//
//	paddle_recordio_compat write -compressor none|snappy|gzip -max-chunk N FRAMES OUT
//	paddle_recordio_compat read IN FRAMES
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/golang/snappy"
)

const (
	magic     = 0x01020304
	headerLen = 20
)

var compressors = map[string]uint32{"none": 0, "snappy": 1, "gzip": 2}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: paddle_recordio_compat write|read ..."))
	}
	var err error
	switch os.Args[1] {
	case "write":
		fs := flag.NewFlagSet("write", flag.ExitOnError)
		comp := fs.String("compressor", "snappy", "none, snappy or gzip")
		maxChunk := fs.Int("max-chunk", 32<<20, "maximum record bytes per chunk")
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() != 2 {
			fail(errors.New("write needs FRAMES OUT"))
		}
		code, ok := compressors[*comp]
		if !ok {
			fail(fmt.Errorf("unknown compressor %q", *comp))
		}
		err = writeFile(fs.Arg(0), fs.Arg(1), code, *maxChunk)
	case "read":
		if len(os.Args) != 4 {
			fail(errors.New("read needs IN FRAMES"))
		}
		err = readFile(os.Args[2], os.Args[3])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "paddle_recordio_compat:", err)
	os.Exit(1)
}

func readFrames(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for len(data) > 0 {
		if len(data) < 4 {
			return nil, errors.New("frames file: truncated length")
		}
		n := binary.LittleEndian.Uint32(data)
		data = data[4:]
		if uint64(n) > uint64(len(data)) {
			return nil, errors.New("frames file: truncated record")
		}
		out = append(out, data[:n])
		data = data[n:]
	}
	return out, nil
}

func writeFrames(path string, records [][]byte) error {
	var buf bytes.Buffer
	for _, r := range records {
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(r)))
		buf.Write(n[:])
		buf.Write(r)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// compress returns the payload as stored in the file.
func compress(raw []byte, code uint32) ([]byte, error) {
	var out bytes.Buffer
	var w io.WriteCloser
	switch code {
	case 0:
		return raw, nil
	case 1:
		w = snappy.NewBufferedWriter(&out)
	case 2:
		w = gzip.NewWriter(&out)
	default:
		return nil, fmt.Errorf("unknown compressor code %d", code)
	}
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func decompress(stored []byte, code uint32) ([]byte, error) {
	switch code {
	case 0:
		return stored, nil
	case 1:
		return io.ReadAll(snappy.NewReader(bytes.NewReader(stored)))
	case 2:
		r, err := gzip.NewReader(bytes.NewReader(stored))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	default:
		return nil, fmt.Errorf("unknown compressor code %d", code)
	}
}

func writeFile(framesPath, outPath string, code uint32, maxChunk int) error {
	records, err := readFrames(framesPath)
	if err != nil {
		return err
	}
	f, err := os.Create(outPath)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	var pending [][]byte
	pendingBytes := 0
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		var raw bytes.Buffer
		for _, r := range pending {
			var n [4]byte
			binary.LittleEndian.PutUint32(n[:], uint32(len(r)))
			raw.Write(n[:])
			raw.Write(r)
		}
		stored, err := compress(raw.Bytes(), code)
		if err != nil {
			return err
		}
		var h [headerLen]byte
		binary.LittleEndian.PutUint32(h[0:], magic)
		binary.LittleEndian.PutUint32(h[4:], crc32.ChecksumIEEE(stored))
		binary.LittleEndian.PutUint32(h[8:], code)
		binary.LittleEndian.PutUint32(h[12:], uint32(len(stored)))
		binary.LittleEndian.PutUint32(h[16:], uint32(len(pending)))
		if _, err := w.Write(h[:]); err != nil {
			return err
		}
		if _, err := w.Write(stored); err != nil {
			return err
		}
		pending, pendingBytes = nil, 0
		return nil
	}
	for _, r := range records {
		// Same cut rule as PaddlePaddle's writer: record bytes only, checked before adding.
		if pendingBytes+len(r) > maxChunk {
			if err := flush(); err != nil {
				return err
			}
		}
		pending = append(pending, r)
		pendingBytes += len(r)
	}
	if err := flush(); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func readFile(inPath, framesPath string) error {
	data, err := os.ReadFile(inPath)
	if err != nil {
		return err
	}
	var records [][]byte
	for chunk, off := 0, 0; off < len(data); chunk++ {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%s: chunk %d at offset %d: %s", inPath, chunk, off, fmt.Sprintf(format, a...))
		}
		if len(data)-off < headerLen {
			return bad("truncated header")
		}
		h := data[off : off+headerLen]
		if binary.LittleEndian.Uint32(h[0:]) != magic {
			return bad("bad magic")
		}
		sum := binary.LittleEndian.Uint32(h[4:])
		code := binary.LittleEndian.Uint32(h[8:])
		size := binary.LittleEndian.Uint32(h[12:])
		count := binary.LittleEndian.Uint32(h[16:])
		if uint64(size) > uint64(len(data)-off-headerLen) {
			return bad("truncated payload")
		}
		stored := data[off+headerLen : off+headerLen+int(size)]
		if crc32.ChecksumIEEE(stored) != sum {
			return bad("checksum mismatch")
		}
		raw, err := decompress(stored, code)
		if err != nil {
			return bad("decompress: %v", err)
		}
		for i := uint32(0); i < count; i++ {
			if len(raw) < 4 {
				return bad("record %d: truncated length", i)
			}
			n := binary.LittleEndian.Uint32(raw)
			raw = raw[4:]
			if uint64(n) > uint64(len(raw)) {
				return bad("record %d: truncated", i)
			}
			records = append(records, raw[:n])
			raw = raw[n:]
		}
		if len(raw) != 0 {
			return bad("%d trailing payload bytes", len(raw))
		}
		off += headerLen + int(size)
	}
	return writeFrames(framesPath, records)
}
