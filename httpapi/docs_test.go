package httpapi

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"testing"
)

// The documents go gzipped to a client that accepts gzip, under their own
// ETag, and plain to one that does not; either revalidates with 304.
func TestDocsAreServedGzipped(t *testing.T) {
	a := newTestAPI(t)
	raw := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func(path, encoding, ifNoneMatch string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, a.http.URL+path, nil)
		req.Header.Set("Accept-Encoding", encoding)
		if ifNoneMatch != "" {
			req.Header.Set("If-None-Match", ifNoneMatch)
		}
		res, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	for _, path := range []string{"/openapi.json", "/llms-full.txt"} {
		plainRes, plain := get(path, "identity", "")
		if plainRes.StatusCode != 200 || plainRes.Header.Get("Content-Encoding") != "" || plainRes.Header.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("%s without gzip: %d %v", path, plainRes.StatusCode, plainRes.Header)
		}
		gzRes, gz := get(path, "br;q=1.0, gzip;q=0.8", "")
		if gzRes.StatusCode != 200 || gzRes.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s with gzip: %d %v", path, gzRes.StatusCode, gzRes.Header)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		unzipped, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(unzipped, plain) {
			t.Fatalf("%s: the gzipped body is not the document (%v)", path, err)
		}
		if len(gz)*3 > len(plain) {
			t.Fatalf("%s: gzip %d bytes of %d", path, len(gz), len(plain))
		}
		t.Logf("%s: %d bytes, gzipped %d", path, len(plain), len(gz))
		plainTag, gzTag := plainRes.Header.Get("ETag"), gzRes.Header.Get("ETag")
		if plainTag == "" || plainTag == gzTag {
			t.Fatalf("%s: ETags %q and %q, want two", path, plainTag, gzTag)
		}
		if res, _ := get(path, "gzip", gzTag); res.StatusCode != http.StatusNotModified {
			t.Fatalf("%s: revalidating the gzipped one: %d", path, res.StatusCode)
		}
		if res, _ := get(path, "", plainTag); res.StatusCode != http.StatusNotModified {
			t.Fatalf("%s: revalidating the plain one: %d", path, res.StatusCode)
		}
		if res, _ := get(path, "gzip", plainTag); res.StatusCode != 200 {
			t.Fatalf("%s: the plain ETag revalidated the gzipped representation: %d", path, res.StatusCode)
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"": false, "identity": false, "gzip": true, "GZIP": true, "x-gzip": true, "deflate, gzip;q=0.5": true,
		"gzip;q=0": false, "gzip; q=0.0": false, "*": true, "*;q=0": false, "gzip;q=0, *": false, "*, gzip;q=0": false,
		"br, *;q=0.1": true, "br": false,
	} {
		if got := acceptsGzip(h); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", h, got, want)
		}
	}
}
