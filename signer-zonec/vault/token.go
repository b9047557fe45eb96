package vault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/vault/api"
)

// Re-login after a failed cert login waits between these bounds.
const (
	reloginMin = time.Second
	reloginMax = 30 * time.Second
)

// login authenticates with signerd's TLS client certificate through the
// cert auth method and sets the token it returns.
func (b *Backend) login(ctx context.Context) (*api.Secret, error) {
	body := map[string]any{}
	if b.cfg.CertRole != "" {
		body["name"] = b.cfg.CertRole
	}
	s, err := b.client.Logical().WriteWithContext(ctx, "auth/"+b.cfg.CertMount+"/login", body)
	if err != nil {
		return nil, b.classify("vault cert login", err)
	}
	if s == nil || s.Auth == nil || s.Auth.ClientToken == "" {
		return nil, fmt.Errorf("vault cert login at %s: no token in the answer", b.cfg.Addr)
	}
	b.client.SetToken(s.Auth.ClientToken)
	b.log.Info("logged in to vault with a client certificate", "ttl", time.Duration(s.Auth.LeaseDuration)*time.Second, "renewable", s.Auth.Renewable)
	return s, nil
}

// tokenSecret looks the configured token up, which checks it, and shapes
// the answer as the auth secret the lifetime watcher renews.
func (b *Backend) tokenSecret(ctx context.Context) (*api.Secret, error) {
	s, err := b.client.Auth().Token().LookupSelfWithContext(ctx)
	if err != nil {
		return nil, b.classify("vault token lookup", err)
	}
	renewable, err := s.TokenIsRenewable()
	if err != nil {
		return nil, fmt.Errorf("vault token lookup: %w", err)
	}
	ttl, err := s.TokenTTL()
	if err != nil {
		return nil, fmt.Errorf("vault token lookup: %w", err)
	}
	return &api.Secret{Auth: &api.SecretAuth{
		ClientToken:   b.client.Token(),
		Renewable:     renewable,
		LeaseDuration: int(ttl / time.Second),
	}}, nil
}

// keepTokenAlive renews a renewable token with Vault's lifetime watcher
// until ctx ends. When the watcher gives up (the token reached its maximum
// TTL, or renewals failed until it expired), cert auth logs in again;
// token auth cannot, and Key fails closed once the token expires, which
// is logged as an error. A token that never expires (ttl 0, such as a
// root token) needs nothing.
func (b *Backend) keepTokenAlive(ctx context.Context, secret *api.Secret) {
	defer close(b.renewDone)
	for {
		if secret.Auth.LeaseDuration <= 0 {
			return
		}
		err := b.watch(ctx, secret)
		if ctx.Err() != nil {
			return
		}
		if b.cfg.Auth == AuthToken {
			b.log.Error("vault token can no longer be renewed; signerd fails closed once it expires. Give signerd a new token, or use cert auth", "err", err)
			return
		}
		b.log.Warn("vault token lifetime ended; logging in again", "err", err)
		if secret, err = b.relogin(ctx); err != nil {
			return // ctx ended
		}
	}
}

// watch runs one lifetime watcher over secret and returns when it ends.
// With cert auth it also returns as soon as a renewal comes back shorter
// than the token's TTL: the token has hit its maximum TTL, and logging in
// again now, rather than in the watcher's last moments, leaves the most
// room before the old token expires.
func (b *Backend) watch(ctx context.Context, secret *api.Secret) error {
	full := secret.Auth.LeaseDuration
	w, err := b.client.NewLifetimeWatcher(&api.LifetimeWatcherInput{Secret: secret})
	if err != nil {
		return err
	}
	go w.Start()
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-w.DoneCh():
			if err == nil {
				err = errors.New("the token reached the end of its renewable lifetime")
			}
			return err
		case r := <-w.RenewCh():
			ttl := time.Duration(0)
			if r.Secret != nil && r.Secret.Auth != nil {
				ttl = time.Duration(r.Secret.Auth.LeaseDuration) * time.Second
			}
			b.log.Debug("vault token renewed", "ttl", ttl)
			if b.cfg.Auth == AuthCert && ttl < time.Duration(full)*time.Second {
				return errors.New("the token's renewals are capped by its maximum TTL")
			}
		}
	}
}

// relogin logs in with the client certificate until it succeeds or ctx
// ends, backing off between failures.
func (b *Backend) relogin(ctx context.Context) (*api.Secret, error) {
	wait := reloginMin
	for {
		lctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout+time.Second)
		s, err := b.login(lctx)
		cancel()
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.log.Error("vault cert login failed; signerd fails closed until it succeeds", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, reloginMax)
	}
}
