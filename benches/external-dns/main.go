// Command dnswatch runs external-dns's own Ingress source (sigs.k8s.io/external-dns/source)
// against a kubeconfig and reports, the way external-dns's controller would see them, every
// change of the DNS targets it would publish per hostname. It is the ADDRESS-change counter of
// benches/fight.rs; nothing here is shipped or tested.
//
// It polls Endpoints(ctx) every -interval (external-dns's own loop polls on --interval, 1 min by
// default, and sooner on events; polling every 200 ms sees every change that lives longer than
// that), keys each endpoint by DNS name and record type, and compares the sorted target list
// with the previous poll. Output on stdout, one line each:
//
//	ready <hostnames> <ms>             after the informer synced and the first poll set the baseline
//	change <unix-ms> <name> <type> <old> -> <new>   a target set changed ("-" = absent)
//	total <changes> <polls> <max-poll-ms> <new>=<n>...   on SIGTERM/SIGINT, then it exits 0;
//	                                                the changes by the target set they changed to,
//	                                                so a reader can tell flaps from heals
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"sigs.k8s.io/external-dns/source"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server to watch (required)")
	class := flag.String("ingress-class", "", "external-dns --ingress-class (empty: every class)")
	namespace := flag.String("namespace", "", "external-dns --namespace (empty: all)")
	interval := flag.Duration("interval", 200*time.Millisecond, "how often to call Endpoints")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "dnswatch: -kubeconfig is required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *class, *namespace, *interval); err != nil {
		fmt.Fprintln(os.Stderr, "dnswatch:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, class, namespace string, interval time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rest, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("read kubeconfig %s: %w", kubeconfig, err)
	}
	// One list and one watch: the informer's needs are far below any QPS limit.
	client, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	cfg := &source.Config{
		Namespace:        namespace,
		AnnotationFilter: labels.Everything(),
		LabelFilter:      labels.Everything(),
	}
	if class != "" {
		cfg.IngressClassNames = []string{class}
	}
	started := time.Now()
	src, err := source.NewIngressSource(ctx, client, cfg)
	if err != nil {
		return fmt.Errorf("external-dns Ingress source: %w", err)
	}
	last, err := targets(ctx, src)
	if err != nil {
		return err
	}
	fmt.Printf("ready %d %d\n", len(last), time.Since(started).Milliseconds())
	var changes, polls int
	byNew := map[string]int{}
	var slowest time.Duration
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			values := make([]string, 0, len(byNew))
			for value, n := range byNew {
				values = append(values, fmt.Sprintf("%s=%d", value, n))
			}
			sort.Strings(values)
			fmt.Printf("total %d %d %d %s\n", changes, polls, slowest.Milliseconds(), strings.Join(values, " "))
			return nil
		case <-tick.C:
		}
		began := time.Now()
		now, err := targets(ctx, src)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			fmt.Fprintln(os.Stderr, "dnswatch: Endpoints:", err)
			continue
		}
		polls++
		if took := time.Since(began); took > slowest {
			slowest = took
		}
		at := time.Now().UnixMilli()
		for key, value := range now {
			if old, ok := last[key]; !ok || old != value {
				changes++
				byNew[value]++
				fmt.Printf("change %d %s %s -> %s\n", at, key, orAbsent(last[key]), value)
			}
		}
		for key, old := range last {
			if _, ok := now[key]; !ok {
				changes++
				byNew["-"]++
				fmt.Printf("change %d %s %s -> -\n", at, key, old)
			}
		}
		last = now
	}
}

// targets is what external-dns would publish: "name type" -> sorted, comma-joined targets.
func targets(ctx context.Context, src source.Source) (map[string]string, error) {
	endpoints, err := src.Endpoints(ctx)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string][]string, len(endpoints))
	for _, ep := range endpoints {
		key := ep.DNSName + " " + ep.RecordType
		byKey[key] = append(byKey[key], ep.Targets...)
	}
	out := make(map[string]string, len(byKey))
	for key, list := range byKey {
		sort.Strings(list)
		out[key] = strings.Join(list, ",")
	}
	return out, nil
}

func orAbsent(value string) string {
	if value == "" {
		return "-"
	}
	return value
}
