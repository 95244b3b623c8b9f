package openai

import (
	"errors"
	"strings"
	"testing"
)

// TestParseTypeErrors: a body whose JSON has the wrong type somewhere is
// refused in the API's words, naming the field, never a Go type.
func TestParseTypeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"messages a string", `{"model":"m","messages":"hi"}`, "messages must be an array of objects, not a string"},
		{"messages an object", `{"model":"m","messages":{"role":"user"}}`, "messages must be an array of objects, not an object"},
		{"message a string", `{"model":"m","messages":["hi"]}`, "each element of messages must be an object, not a string"},
		{"role a number", `{"model":"m","messages":[{"role":1,"content":"x"}]}`, "messages.role must be a string, not a number"},
		{"model a number", `{"model":7,"messages":[{"role":"user","content":"x"}]}`, "model must be a string, not a number"},
		{"model true", `{"model":true}`, "model must be a string, not true or false"},
		{"body an array", `[1,2]`, "the body must be a JSON object, not an array"},
		{"body a string", `"hi"`, "the body must be a JSON object, not a string"},
		{"empty", ``, "not a JSON object of the request: the body is empty"},
		{"cut short", `{"model":"m","messages":[`, "not a JSON object of the request: the JSON ends early"},
		{"bad character", `{"model":x}`, "not a JSON object of the request: invalid JSON at byte 10: invalid character 'x' looking for beginning of value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(ChatCompletions, []byte(tc.body), 0)
			if !errors.Is(err, ErrBadBody) || err.Error() != "invalid request body: "+tc.want {
				t.Fatalf("Parse: %v\nwant invalid request body: %s", err, tc.want)
			}
			for _, goish := range []string{"Go ", "struct", "openai.", "[]", "unmarshal"} {
				if strings.Contains(err.Error(), goish) {
					t.Errorf("message has Go words %q: %v", goish, err)
				}
			}
		})
	}
}
