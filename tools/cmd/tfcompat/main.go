// Command tfcompat stands between the Terraform AWS provider and the local
// emulators during make tf-apply-local, and mends two answers in which the
// emulators differ from AWS in a way the provider waits on forever:
//
//   - DynamoDB Local does not report WarmThroughput. After CreateTable the
//     provider waits for the table's WarmThroughput.Status to be ACTIVE; AWS
//     reports on-demand tables warm (12000 reads, 4000 writes per second) and
//     ACTIVE at once, so tfcompat adds that to DescribeTable, CreateTable and
//     UpdateTable answers (tables and their indexes) that lack it, and
//     recomputes the body's CRC32 header.
//   - fauxqs keeps a cleared queue attribute (Policy, RedriveAllowPolicy set
//     to "") as an empty string; AWS removes it. The provider deletes those
//     resources by clearing the attribute and waits until it is gone, so
//     tfcompat drops empty attributes from GetQueueAttributes answers.
//
// Nothing else is changed. Only the provider goes through it: the worker and
// the relay talk to the emulators directly.
//
//	tfcompat -sqs http://127.0.0.1:9324 -dynamodb http://127.0.0.1:8000
//
// prints "sqs URL" and "dynamodb URL" (its own listeners) and serves until
// SIGTERM or SIGINT.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// AWS's warm throughput of a new on-demand table, as DescribeTable reports it.
var warm = map[string]any{"ReadUnitsPerSecond": 12000, "WriteUnitsPerSecond": 4000, "Status": "ACTIVE"}

func main() {
	sqsURL := flag.String("sqs", "", "URL of the SQS emulator")
	ddbURL := flag.String("dynamodb", "", "URL of DynamoDB Local")
	flag.Parse()
	if *sqsURL == "" || *ddbURL == "" {
		fmt.Fprintln(os.Stderr, "tfcompat: give -sqs and -dynamodb")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errs := make(chan error, 2)
	var servers []*http.Server
	for _, up := range []struct {
		name, url string
		mend      func(target string, body map[string]any) bool
	}{{"sqs", *sqsURL, mendSQS}, {"dynamodb", *ddbURL, mendDynamoDB}} {
		srv, addr, err := serve(up.url, up.mend, errs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tfcompat:", err)
			os.Exit(1)
		}
		servers = append(servers, srv)
		fmt.Printf("%s http://%s\n", up.name, addr)
	}
	select {
	case <-ctx.Done():
	case err := <-errs:
		fmt.Fprintln(os.Stderr, "tfcompat:", err)
		os.Exit(1)
	}
	for _, s := range servers {
		_ = s.Shutdown(context.Background())
	}
}

// serve proxies a listener on 127.0.0.1 to upstream, mending JSON answers.
func serve(upstream string, mend func(string, map[string]any) bool, errs chan<- error) (*http.Server, string, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, "", err
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host                          // fauxqs builds queue URLs from it, as before
		r.Out.Header.Set("Accept-Encoding", "identity") // bodies to read as they are
	}}
	proxy.ModifyResponse = func(resp *http.Response) error {
		target := resp.Request.Header.Get("X-Amz-Target")
		if resp.StatusCode != http.StatusOK || target == "" {
			return nil
		}
		raw, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		out := raw
		var body map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&body) == nil && mend(target[strings.LastIndex(target, ".")+1:], body) {
			if out, err = json.Marshal(body); err != nil {
				return err
			}
			if resp.Header.Get("X-Amz-Crc32") != "" {
				resp.Header.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(out)), 10))
			}
		}
		resp.Body = io.NopCloser(bytes.NewReader(out))
		resp.ContentLength = int64(len(out))
		resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: proxy}
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			errs <- err
		}
	}()
	return srv, ln.Addr().String(), nil
}

// mendDynamoDB adds warm throughput to a table description, and to its
// global secondary indexes, that lack it.
func mendDynamoDB(op string, body map[string]any) bool {
	var table map[string]any
	switch op {
	case "DescribeTable":
		table, _ = body["Table"].(map[string]any)
	case "CreateTable", "UpdateTable":
		table, _ = body["TableDescription"].(map[string]any)
	}
	if table == nil {
		return false
	}
	changed := false
	addWarm := func(m map[string]any) {
		if _, ok := m["WarmThroughput"]; !ok {
			m["WarmThroughput"] = warm
			changed = true
		}
	}
	addWarm(table)
	if gsis, ok := table["GlobalSecondaryIndexes"].([]any); ok {
		for _, g := range gsis {
			if gsi, ok := g.(map[string]any); ok {
				addWarm(gsi)
			}
		}
	}
	return changed
}

// mendSQS drops the attributes fauxqs keeps as "" once cleared.
func mendSQS(op string, body map[string]any) bool {
	if op != "GetQueueAttributes" {
		return false
	}
	attrs, _ := body["Attributes"].(map[string]any)
	changed := false
	for k, v := range attrs {
		if v == "" {
			delete(attrs, k)
			changed = true
		}
	}
	return changed
}
