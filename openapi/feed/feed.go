// Package feed reads txmanager's event feed (GET /internal/v1/events) for
// its consumers, the gateway and the ledger, through the client generated
// from openapi/txmanager.yaml, with the errors of shared/errs: no answer is
// errs.Unavailable, a problem document keeps its kind (errs.FromUpstream).
package feed

import (
	"context"
	"fmt"
	"time"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/txmanagerapi"
	"github.com/txfence/txfence/shared/errs"
)

// Read returns up to limit events after seq after, waiting up to wait
// (whole seconds) for the first when there are none yet, with the feed's
// head: the highest seq numbered when the page was read.
func Read(ctx context.Context, api *txmanagerapi.ClientWithResponses, after uint64, limit int, wait time.Duration) (components.EventList, error) {
	a, l, w := int64(after), components.Limit(limit), int(wait/time.Second)
	resp, err := api.ListEventsWithResponse(ctx, &txmanagerapi.ListEventsParams{After: &a, Limit: &l, Wait: &w})
	if err != nil {
		return components.EventList{}, errs.Wrap(errs.Unavailable, "read events: txmanager did not answer", err)
	}
	if resp.JSON200 == nil {
		return components.EventList{}, fmt.Errorf("read events: %w", errs.FromUpstream(resp.StatusCode(), resp.HTTPResponse.Header.Get("Content-Type"), resp.Body))
	}
	return *resp.JSON200, nil
}
