package httpapi

import "testing"

func TestWithRequestID(t *testing.T) {
	const members = `{"request_id":"k\"1","transit_namespace":"tenant"`
	for body, want := range map[string]string{
		`{"chain_id": 1}`:         members + `,"chain_id": 1}`,
		" \n{ \"from\":\"0x1\" }": members + `, "from":"0x1" }`,
		`{}`:                      members + `}`,
		`{ }`:                     members + ` }`,
	} {
		got, err := withRequestID([]byte(body), `k"1`, "tenant")
		if err != nil || string(got) != want {
			t.Errorf("withRequestID(%q) = %s, %v; want %s", body, got, err, want)
		}
	}
	if _, err := withRequestID([]byte(`[1]`), "k", "tenant"); err == nil {
		t.Error("a body that is not an object: no error")
	}
}
