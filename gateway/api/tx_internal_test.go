package api

import "testing"

func TestWithRequestID(t *testing.T) {
	for body, want := range map[string]string{
		`{"chain_id": 1}`:         `{"request_id":"k\"1","chain_id": 1}`,
		" \n{ \"from\":\"0x1\" }": `{"request_id":"k\"1", "from":"0x1" }`,
		`{}`:                      `{"request_id":"k\"1"}`,
		`{ }`:                     `{"request_id":"k\"1" }`,
	} {
		got, err := withRequestID([]byte(body), `k"1`)
		if err != nil || string(got) != want {
			t.Errorf("withRequestID(%q) = %s, %v; want %s", body, got, err, want)
		}
	}
	if _, err := withRequestID([]byte(`[1]`), "k"); err == nil {
		t.Error("a body that is not an object: no error")
	}
}
