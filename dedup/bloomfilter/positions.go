package bloomfilter

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
)

// appendPositions appends id's k bit positions in [0, m) to dst, as decimal
// strings for the script's ARGV. They come from SHA-256 of the id by
// enhanced double hashing (Dillinger and Manolios): two independent 64-bit
// halves stand in for k hash functions without the clustering of plain
// double hashing. Every client computes the same positions for the same id,
// m and k, so consumers in any process share one filter.
func appendPositions(dst []string, id string, m uint64, k int) []string {
	var buf [32]uint64
	for _, p := range positions(buf[:0], id, m, k) {
		dst = append(dst, strconv.FormatUint(p, 10))
	}
	return dst
}

// positions appends id's k bit positions in [0, m) to dst.
func positions(dst []uint64, id string, m uint64, k int) []uint64 {
	sum := sha256.Sum256([]byte(id))
	x := binary.LittleEndian.Uint64(sum[0:8]) % m
	y := binary.LittleEndian.Uint64(sum[8:16]) % m
	for i := range k {
		dst = append(dst, x)
		x = (x + y) % m // x, y < m <= 2^32: no overflow
		y = (y + uint64(i)) % m
	}
	return dst
}
