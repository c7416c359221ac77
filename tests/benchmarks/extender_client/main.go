// Command extender_client calls a scheduler extender as kube-scheduler v1.37 does, for
// tests/benchmarks/bench_extender_burst.py: the same HTTP client (pkg/scheduler/extender.go's
// makeTransport for enableHTTPS: false: utilnet.SetTransportDefaults(&http.Transport{}), so
// Go's default of 2 idle connections per host), the same request (send: json.Marshal of the
// extender/v1 args, POST, Content-Type: application/json, the answer decoded by json.Decoder),
// and a burst's pattern: one pod at a time through filter (and prioritize when the filter
// passes on more than one node), then its bind in a goroutine of its own, as kube-scheduler's
// binding cycle runs, while the next pod is filtered.
//
// With -api-listen it serves instead as the API server's bindings endpoint (apiserver.go).
//
// It reads the pods (a JSON array of v1.Pod) and node names from -input and prints one JSON
// object: requests by verb, connections dialled, failures, seconds, and the bind requests' times
// (bind_p50_ms, bind_p99_ms, bind_max_ms: sent to answered, as kube-scheduler's binding cycle waits);
// filter_ms and bind_ms: each pod's filter and bind request in the burst's order, sent to answered
// (-1 where the pod's request was not sent or failed), so the first requests can be read against the rest.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

type input struct {
	Pods      []v1.Pod `json:"pods"`
	NodeNames []string `json:"nodeNames"`
}

type extender struct {
	prefix string
	client *http.Client
}

// send is pkg/scheduler/extender.go's HTTPExtender.send.
func (h *extender) send(action string, args interface{}, result interface{}) error {
	out, err := json.Marshal(args)
	if err != nil {
		return err
	}
	url := strings.TrimRight(h.prefix, "/") + "/" + action
	req, err := http.NewRequest("POST", url, bytes.NewReader(out))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("failed %v with extender at URL %v, code %v", action, url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(result)
}

// assumedPods is kube-scheduler's cache of pods assumed on nodes: GPUs taken by node.
type assumedPods struct {
	mu     sync.Mutex
	byNode map[string]int
}

func (a *assumedPods) count(node string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byNode[node]
}

func (a *assumedPods) add(node string, gpus int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.byNode[node] += gpus
}

func main() {
	prefix := flag.String("url", "http://127.0.0.1:8888/v1/extender", "the extender's urlPrefix")
	path := flag.String("input", "", "JSON file: {pods: [v1.Pod], nodeNames: [string]}")
	offered := flag.Int("offered", 420, "node names offered per filter (kube-scheduler's percentageOfNodesToScore of 1,000 nodes)")
	gpusPerNode := flag.Int("gpus-per-node", 8, "GPUs of each node; every pod asks for one")
	idlePerHost := flag.Int("max-idle-per-host", 0, "the transport's MaxIdleConnsPerHost; 0 is kube-scheduler's (Go's default, 2)")
	cycle := flag.Duration("cycle", 0, "kube-scheduler's own work per pod besides the extender calls (its scheduling cycle)")
	apiListen := flag.String("api-listen", "", "instead of a burst: serve bindings over TLS on this address (-api-cert, -api-key)")
	apiCert := flag.String("api-cert", "", "the bindings server's certificate file")
	apiKey := flag.String("api-key", "", "the bindings server's key file")
	apiMin := flag.Duration("api-min", 100*time.Millisecond, "the bindings server's shortest wait")
	apiMax := flag.Duration("api-max", 200*time.Millisecond, "the bindings server's longest wait")
	flag.Parse()
	if *apiListen != "" {
		panic(serveBindings(*apiListen, *apiCert, *apiKey, *apiMin, *apiMax))
	}

	raw, err := os.ReadFile(*path)
	if err != nil {
		panic(err)
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		panic(err)
	}

	var dials atomic.Int64
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second} // http.DefaultTransport's
	transport := utilnet.SetTransportDefaults(&http.Transport{
		// Counts the connections; the dial itself is the default transport's.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: *idlePerHost,
	})
	h := &extender{prefix: *prefix, client: &http.Client{Transport: transport, Timeout: 5 * time.Second}}

	var requests sync.Map
	count := func(verb string) {
		n, _ := requests.LoadOrStore(verb, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	var failures atomic.Int64
	var failed sync.Mutex
	var failureMessages []string
	fail := func(err error) {
		failures.Add(1)
		failed.Lock()
		if len(failureMessages) < 10 {
			failureMessages = append(failureMessages, err.Error())
		}
		failed.Unlock()
	}

	assumed := &assumedPods{byNode: map[string]int{}}
	var binds sync.WaitGroup
	var bindTimes sync.Mutex
	var bindSeconds []float64 // each bind request's time, as kube-scheduler's binding cycle waits for it
	// Each pod's filter and bind, sent to answered, in the burst's order (-1: not sent, or failed).
	filterByPod, bindByPod := make([]float64, len(in.Pods)), make([]float64, len(in.Pods))
	for i := range in.Pods {
		filterByPod[i], bindByPod[i] = -1, -1
	}
	started := time.Now()
	for i := range in.Pods {
		pod := &in.Pods[i]
		// kube-scheduler's own filters run first: a node whose GPUs its cache holds for pods
		// assumed (bound or binding) is not offered. Then a rotating subset, as its.
		names := make([]string, 0, *offered)
		for j := 0; j < len(in.NodeNames) && len(names) < *offered; j++ {
			name := in.NodeNames[(i*7+j)%len(in.NodeNames)]
			if assumed.count(name) < *gpusPerNode {
				names = append(names, name)
			}
		}
		var filtered extenderv1.ExtenderFilterResult
		count("filter")
		filterSent := time.Now()
		if err := h.send("filter", &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names}, &filtered); err != nil {
			fail(err)
			continue
		}
		filterByPod[i] = time.Since(filterSent).Seconds() * 1000
		if filtered.Error != "" || filtered.NodeNames == nil || len(*filtered.NodeNames) == 0 {
			fail(fmt.Errorf("pod %s: filter passed on no node: %q", pod.Name, filtered.Error))
			continue
		}
		node := (*filtered.NodeNames)[0]
		if len(*filtered.NodeNames) > 1 {
			var scores extenderv1.HostPriorityList
			count("prioritize")
			if err := h.send("prioritize", &extenderv1.ExtenderArgs{Pod: pod, NodeNames: filtered.NodeNames}, &scores); err != nil {
				fail(err)
				continue
			}
			best := int64(-1)
			for _, score := range scores {
				if score.Score > best {
					best, node = score.Score, score.Host
				}
			}
		}
		if *cycle > 0 {
			time.Sleep(*cycle)
		}
		assumed.add(node, 1)
		binds.Add(1)
		go func(i int, pod *v1.Pod, node string) {
			defer binds.Done()
			var result extenderv1.ExtenderBindingResult
			count("bind")
			sent := time.Now()
			err := h.send("bind", &extenderv1.ExtenderBindingArgs{
				PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: pod.UID, Node: node,
			}, &result)
			took := time.Since(sent).Seconds()
			bindTimes.Lock()
			bindSeconds = append(bindSeconds, took)
			bindTimes.Unlock()
			if err == nil && result.Error != "" {
				err = fmt.Errorf("bind %s: %s", pod.Name, result.Error)
			}
			if err != nil {
				assumed.add(node, -1) // kube-scheduler forgets the pod it assumed
				fail(err)
				return
			}
			bindByPod[i] = took * 1000 // its own slot: read after binds.Wait()
		}(i, pod, node)
	}
	binds.Wait()
	out := map[string]interface{}{
		"seconds":   time.Since(started).Seconds(),
		"dials":     dials.Load(),
		"failures":  failures.Load(),
		"filter_ms": filterByPod,
		"bind_ms":   bindByPod,
	}
	if len(bindSeconds) > 0 {
		sort.Float64s(bindSeconds)
		at := func(q float64) float64 { return bindSeconds[int(q*float64(len(bindSeconds)-1))] }
		out["bind_p50_ms"], out["bind_p99_ms"], out["bind_max_ms"] = at(0.5)*1000, at(0.99)*1000, at(1)*1000
	}
	if len(failureMessages) > 0 {
		out["first_failures"] = failureMessages
	}
	byVerb := map[string]int64{}
	requests.Range(func(key, value any) bool {
		byVerb[key.(string)] = value.(*atomic.Int64).Load()
		return true
	})
	out["requests"] = byVerb
	encoded, _ := json.Marshal(out)
	fmt.Println(string(encoded))
}
