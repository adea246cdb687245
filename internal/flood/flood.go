// Package flood sends what a hostile client would to a server under test:
// requests with methods, paths and gRPC method names that are new every
// time and long, so that tests can check that what the server keeps does
// not grow with them.
package flood

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
)

// HeapInUse returns the bytes of live heap objects after a collection: what
// a test measures before and after a flood.
func HeapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Token returns a random HTTP token (a valid method) of n bytes, distinct
// from the others with overwhelming probability.
func Token(rng *rand.Rand, n int) string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var b strings.Builder
	b.Grow(n)
	for range n {
		b.WriteByte(letters[rng.IntN(len(letters))])
	}
	return b.String()
}

// HTTP sends n requests to the server at base ("http://127.0.0.1:port"),
// each with a new method of methodLen bytes and a new path of pathLen
// bytes, and reads every response. It returns the first error, if any.
func HTTP(base string, n, methodLen, pathLen int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 1))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	for i := range n {
		req, err := http.NewRequest(Token(rng, methodLen), base+"/"+Token(rng, pathLen), nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil
}
