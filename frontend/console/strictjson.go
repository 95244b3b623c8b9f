package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// strictJSON refuses what encoding/json would silently accept and gRPC's
// protojson (and /v1/pick) refuse: bytes that are not UTF-8 and \u escapes
// of a lone UTF-16 surrogate (both of which encoding/json rewrites to
// U+FFFD, merging distinct names) and an object with the same key twice
// (where encoding/json keeps the last, so a proxy reading the first sees
// another request).
func strictJSON(data []byte) error {
	if !utf8.Valid(data) {
		return badf("request body: not valid UTF-8")
	}
	if at := loneSurrogate(data); at >= 0 {
		return badf("request body: %s at byte %d is half of a UTF-16 surrogate pair; escape the whole character or send it as UTF-8", data[at:at+6], at)
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

// loneSurrogate returns the offset of the first \uXXXX escape inside a
// JSON string that names a UTF-16 surrogate without its other half, or -1.
// Bytes outside strings and malformed escapes are left to the decoder.
func loneSurrogate(data []byte) int {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			r, ok := escapedRune(data, i)
			switch {
			case !ok:
				i++ // a one-character escape such as \" or \\
			case r >= 0xDC00 && r <= 0xDFFF:
				return i // a low half first
			case r >= 0xD800 && r <= 0xDBFF:
				if lo, ok := escapedRune(data, i+6); !ok || lo < 0xDC00 || lo > 0xDFFF {
					return i
				}
				i += 11
			default:
				i += 5
			}
		}
	}
	return -1
}

// escapedRune reads the \uXXXX escape at data[i:]; ok is false when there
// is none.
func escapedRune(data []byte, i int) (r rune, ok bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	for _, h := range data[i+2 : i+6] {
		switch {
		case h >= '0' && h <= '9':
			r = r<<4 | rune(h-'0')
		case h >= 'a' && h <= 'f':
			r = r<<4 | rune(h-'a'+10)
		case h >= 'A' && h <= 'F':
			r = r<<4 | rune(h-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
