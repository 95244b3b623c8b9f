package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// strictJSON refuses what encoding/json would silently accept and gRPC's
// protojson (and /v1/pick) refuse: bytes that are not UTF-8 (which
// encoding/json rewrites to U+FFFD, merging distinct names) and an object
// with the same key twice (where encoding/json keeps the last, so a proxy
// reading the first sees another request).
func strictJSON(data []byte) error {
	if !utf8.Valid(data) {
		return badf("request body: not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	// Each open object's keys seen so far; nil for an open array.
	var stack []map[string]bool
	expectKey := false // the next string token is an object key
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // a syntax error: the decoder that follows names it
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, map[string]bool{})
				expectKey = true
				continue
			case '[':
				stack = append(stack, nil)
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if expectKey {
				keys := stack[len(stack)-1]
				if keys[v] {
					return badf("request body: key %q appears twice in one object", v)
				}
				keys[v] = true
				expectKey = false
				continue
			}
		}
		// A value ended: in an object, a key comes next.
		expectKey = len(stack) > 0 && stack[len(stack)-1] != nil
	}
}
