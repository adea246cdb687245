// Package pause marks the time a request's handler waits on its client as
// pauses of the request's entry (slidegate.Entry.Pause), for the HTTP
// adapters: the reads of a request's body, the writes of its response.
package pause

import (
	"io"

	"github.com/slidegate/slidegate"
)

// A Body is a request's body whose reads wait on the client: each read is
// a pause of E, so that a client that sends its body slowly does not make
// the service look slow.
type Body struct {
	io.ReadCloser
	E slidegate.Entry
}

// Read reads from the body, paused.
func (b *Body) Read(p []byte) (int, error) {
	b.E.Pause()
	defer b.E.Resume()
	return b.ReadCloser.Read(p)
}

// Wrap returns body read through a Body of e, or body itself if there is
// nothing to read (nil or http.NoBody, which an adapter must keep).
func Wrap(body io.ReadCloser, noBody io.ReadCloser, e slidegate.Entry) io.ReadCloser {
	if body == nil || body == noBody {
		return body
	}
	return &Body{ReadCloser: body, E: e}
}
