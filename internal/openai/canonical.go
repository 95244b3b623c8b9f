package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// canonical is the text of a message list: the tools first (their JSON,
// compacted), then each message as role, a newline, its text content and a
// newline. Content parts contribute their "text" field in order; other
// parts (images, audio) contribute their compacted JSON.
func canonical(tools json.RawMessage, ms []message) (string, error) {
	var sb strings.Builder
	if t := bytes.TrimSpace(tools); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, t); err != nil {
			return "", fmt.Errorf("%w: tools: %v", ErrBadBody, err)
		}
		sb.WriteString("tools\n")
		sb.Write(buf.Bytes())
		sb.WriteByte('\n')
	}
	for i, m := range ms {
		sb.WriteString(m.Role)
		sb.WriteByte('\n')
		if err := content(&sb, m.Content); err != nil {
			return "", fmt.Errorf("%w: messages[%d].content: %v", ErrBadBody, i, err)
		}
		sb.WriteByte('\n')
	}
	return sb.String(), nil
}

type part struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// content writes a message's content: a string, null, or a list of parts.
func content(sb *strings.Builder, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		sb.WriteString(s)
		return nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return fmt.Errorf("not a string or a list of content parts")
	}
	for _, p := range parts {
		var pt part
		if err := json.Unmarshal(p, &pt); err != nil {
			return fmt.Errorf("a content part is not an object")
		}
		if pt.Text != nil {
			sb.WriteString(*pt.Text)
			continue
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, p); err != nil {
			return fmt.Errorf("a content part: %v", err)
		}
		sb.Write(buf.Bytes())
	}
	return nil
}
