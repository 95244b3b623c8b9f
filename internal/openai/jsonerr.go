package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// bodyError words a decoding error of a request body in the API's terms:
// a wrong type names the field and the JSON type it must have ("messages
// must be an array of objects, not a string"), never a Go type; a syntax
// error says where. The result wraps ErrBadBody.
func bodyError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return fmt.Errorf("%w: the body must be a JSON object, not %s", ErrBadBody, jsonValue(te.Value))
		}
		if te.Type == reflect.TypeFor[message]() {
			field = "each element of " + field // an element of messages
		}
		return fmt.Errorf("%w: %s must be %s, not %s", ErrBadBody, field, jsonType(te.Type), jsonValue(te.Value))
	case errors.As(err, &se):
		return fmt.Errorf("%w: not a JSON object of the request: invalid JSON at byte %d: %v", ErrBadBody, se.Offset, se)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: not a JSON object of the request: the body is empty", ErrBadBody)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: not a JSON object of the request: the JSON ends early", ErrBadBody)
	}
	return fmt.Errorf("%w: not a JSON object of the request: %v", ErrBadBody, err)
}

// jsonType names the JSON type a Go type decodes from.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		switch t.Elem().Kind() {
		case reflect.Struct, reflect.Map:
			return "an array of objects"
		case reflect.String:
			return "an array of strings"
		}
		return "an array"
	}
	return "another JSON type"
}

// jsonValue names the JSON value json.UnmarshalTypeError.Value describes
// ("string", "number", "number 1.5", "object", "array", "bool").
func jsonValue(v string) string {
	switch v {
	case "string", "number", "object", "array":
		if v == "array" || v == "object" {
			return "an " + v
		}
		return "a " + v
	case "bool":
		return "true or false"
	}
	if n, ok := strings.CutPrefix(v, "number "); ok {
		return "the number " + n
	}
	return v
}
