package httpapi

import (
	"errors"
	"testing"
)

// TestDecodeRefusesWhatJSONWouldReplace: a body that is not valid UTF-8,
// or that escapes a lone surrogate, is 400 invalid_request; encoding/json
// would otherwise read each as U+FFFD, and two passwords would be one.
func TestDecodeRefusesWhatJSONWouldReplace(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		ok         bool
	}{
		{"plain", `{"username":"alice","password":"pässwörd"}`, true},
		{"escaped pair", `{"username":"alice","password":"\ud83d\ude00"}`, true},
		{"escaped BMP", `{"username":"alice","password":"\u00e9\uffff"}`, true},
		{"escaped backslash then u", `{"username":"alice","password":"\\ud800"}`, true},
		{"U+FFFD itself", "{\"username\":\"alice\",\"password\":\"\uFFFD\"}", true},
		{"raw invalid bytes", "{\"username\":\"alice\",\"password\":\"\xff\xfe\"}", false},
		{"raw overlong bytes", "{\"username\":\"alice\",\"password\":\"\xc0\xc1\"}", false},
		{"invalid bytes in a key", "{\"user\xffname\":\"alice\",\"password\":\"pw\"}", false},
		{"lone high surrogate", `{"username":"alice","password":"\ud800"}`, false},
		{"lone high surrogate at the end", `{"username":"alice","password":"x\udbff"}`, false},
		{"lone low surrogate", `{"username":"alice","password":"\udc00x"}`, false},
		{"high then another high", `{"username":"alice","password":"\ud800\ud800\udc00"}`, false},
		{"high then an escape", `{"username":"alice","password":"\ud800\n"}`, false},
		{"surrogate in the username", `{"username":"\udfff","password":"pw"}`, false},
	} {
		_, err := decodeLogin([]byte(tt.body))
		var e *apiError
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: decodeLogin(%q) = %v; want it decoded", tt.name, tt.body, err)
		case !tt.ok && (!errors.As(err, &e) || e.status != 400 || e.code != "invalid_request" || e.detail != "Body is not valid UTF-8."):
			t.Errorf("%s: decodeLogin(%q) = %v; want 400 invalid_request, Body is not valid UTF-8.", tt.name, tt.body, err)
		}
	}
	if _, err := decodePasswordChange([]byte("{\"current_password\":\"pw\",\"new_password\":\"\xff\xfe-twelve-chars\"}")); err == nil {
		t.Errorf("decodePasswordChange(raw invalid bytes) = nil; want 400 invalid_request")
	}
}
