package follow

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
)

// subscribeHeads keeps an eth_subscribe("newHeads") subscription at url
// (a WebSocket endpoint) open until ctx ends, and signals wake (without
// blocking: one pending signal is enough) on every new head. A head only
// wakes the follower; the step reads the chain itself, so a notification
// is never trusted for what the chain holds, and polling goes on beside
// it in case one is missed. A lost subscription is dialled again after a
// wait that doubles up to maxBackoff.
func (fl *Follower) subscribeHeads(ctx context.Context, url string, wake chan<- struct{}) {
	wait := time.Second
	for {
		err := fl.headsOnce(ctx, url, wake, func() { wait = time.Second })
		if ctx.Err() != nil {
			return
		}
		fl.cfg.Log.Warn("newHeads subscription lost; polling meanwhile", "url", url, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, maxBackoff)
	}
}

// headsOnce runs one subscription until it fails; subscribed is called once
// it is established.
func (fl *Follower) headsOnce(ctx context.Context, url string, wake chan<- struct{}, subscribed func()) error {
	c, err := rpc.DialContext(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close()
	heads := make(chan struct {
		Number hexutil.Uint64 `json:"number"`
	}, 16)
	sub, err := c.EthSubscribe(ctx, heads, "newHeads")
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	subscribed()
	fl.cfg.Log.Info("following new heads by subscription", "url", url)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-sub.Err():
			return err
		case <-heads:
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}
