package main

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// serveBindings answers POST .../binding over TLS as the API server does (201 and a Status),
// each after a wait drawn from [minWait, maxWait): the API server's latency under a burst.
// cellfit's API client then spends what it does on the real one: TLS, its pool, parsing.
func serveBindings(addr, certFile, keyFile string, minWait, maxWait time.Duration) error {
	status := []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}`)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/binding") {
			http.NotFound(w, r)
			return
		}
		time.Sleep(minWait + time.Duration(rand.Int64N(int64(maxWait-minWait)+1)))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(status)
	})
	return http.ListenAndServeTLS(addr, certFile, keyFile, handler)
}
