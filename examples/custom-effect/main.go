// Command custom-effect is the worker with an effect of its own, as README.md
// shows: register it, then hand over to the worker's command line. It is
// built, tested and deployed like the stock worker:
//
//	go run ./examples/custom-effect run --queue URL --effect email
//	make image MAIN=./examples/custom-effect    # the ECS image
//	make dist MAIN=./examples/custom-effect DIST=dist/custom-effect
//
// terraform/ deploys it on ECS with the repository's modules.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/worker"
)

// sendEmail posts each message to an email API, with the dedup key as its
// idempotency key.
type sendEmail struct {
	url, token string
	client     *http.Client
}

func (e sendEmail) Apply(ctx context.Context, in effect.Input) (effect.Output, error) {
	if in.Message.Body == "" {
		return effect.Output{}, effect.Permanent(errors.New("empty body")) // to the DLQ
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, strings.NewReader(in.Message.Body))
	if err != nil {
		return effect.Output{}, effect.Permanent(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", in.Key) // a repeat after a crash is sent once
	resp, err := e.client.Do(req)
	if err != nil {
		return effect.Output{}, err // any other error is retried with backoff
	}
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		return effect.Output{}, effect.RetryAfter(time.Minute, errors.New(resp.Status)) // no sooner than 1 min
	case code >= 500:
		return effect.Output{}, fmt.Errorf("email API: %s", resp.Status)
	case code >= 300:
		return effect.Output{}, effect.Permanent(fmt.Errorf("email API: %s", resp.Status))
	}
	return effect.Output{Result: []byte(`{"sent":true}`)}, nil // replayed for duplicates
}

// newSendEmail builds the effect at start-up from its own settings:
// EMAIL_API_URL from the environment, EMAIL_API_TOKEN from a secret.
func newSendEmail(env effect.Env) (effect.Effect, error) {
	url, _ := env.Lookup("EMAIL_API_URL")
	token, _ := env.Lookup("EMAIL_API_TOKEN")
	if url == "" || token == "" {
		return nil, errors.New("EMAIL_API_URL and EMAIL_API_TOKEN are required by the email effect")
	}
	// env.HTTPClient has timeouts; env.AWS builds clients of other services.
	return sendEmail{url: url, token: token, client: env.HTTPClient}, nil
}

func main() {
	effect.Register("email", newSendEmail)
	os.Exit(worker.Main(os.Args[1:]))
}
