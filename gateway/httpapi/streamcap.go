package httpapi

import (
	"sync"

	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/errs"
)

// streamSlots caps the event streams this gateway node holds open per key
// and per tenant: each stream is a connection, a goroutine and, when it
// falls behind the feed hub's window, reads of txmanager's feed; a key
// must not be able to hold them all.
type streamSlots struct {
	perKey, perTenant int

	mu       sync.Mutex
	byKey    map[uuid.UUID]int
	byTenant map[uuid.UUID]int
}

func newStreamSlots(perKey, perTenant int) *streamSlots {
	return &streamSlots{perKey: perKey, perTenant: perTenant, byKey: map[uuid.UUID]int{}, byTenant: map[uuid.UUID]int{}}
}

// take reserves a slot for a stream of key in tenant and returns its
// release, or an errs.RateLimited error when either cap is reached.
func (s *streamSlots) take(key, tenant uuid.UUID) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.perKey > 0 && s.byKey[key] >= s.perKey:
		return nil, errs.Errorf(errs.RateLimited, "this key has %d event streams open on this node, its most: close one, or retry later", s.byKey[key])
	case s.perTenant > 0 && s.byTenant[tenant] >= s.perTenant:
		return nil, errs.Errorf(errs.RateLimited, "the tenant has %d event streams open on this node, its most: close one, or retry later", s.byTenant[tenant])
	}
	s.byKey[key]++
	s.byTenant[tenant]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.byKey[key]--; s.byKey[key] == 0 {
				delete(s.byKey, key)
			}
			if s.byTenant[tenant]--; s.byTenant[tenant] == 0 {
				delete(s.byTenant, tenant)
			}
		})
	}, nil
}
