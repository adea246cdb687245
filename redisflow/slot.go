package redisflow

import "strings"

// hashTag returns what Redis Cluster hashes of a key: the part between the
// first '{' and the first '}' after it, if that is not empty; else the
// whole key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// slot returns a key's Redis Cluster slot: CRC16 (XMODEM) of its hash tag,
// modulo 16384.
func slot(key string) int {
	var crc uint16
	tag := hashTag(key)
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
