// Package openapi holds the OpenAPI 3.0.3 specifications of every txfence
// API and embeds them, for request validation and tests. The Go code
// generated from them lives in the subpackages.
//
// Layout:
//
//	components.yaml      shared schemas (Problem, Uint256, Address, Hash,
//	                     ChainId, pagination, Health, Readiness, the Event
//	                     envelope and the webhook payloads), parameters,
//	                     headers and responses; no paths of its own
//	gateway.yaml         the public API (gatewayd's public listener)
//	txmanager.yaml       internal APIs, served over mutual TLS
//	signer.yaml
//	mevrouter.yaml
//	ledger.yaml
//	components/          package components: models of components.yaml
//	gatewayapi/          package gatewayapi: types and ClientWithResponses
//	txmanagerapi/        of one spec each, no server code (every service
//	signerapi/           serves its API from hand-written handlers that
//	mevrouterapi/        openapitest.Conform checks against the spec); the
//	ledgerapi/           shared schemas are not generated again but
//	                     imported from components (oapi-codegen
//	                     import-mapping of ./components.yaml)
//	generate.sh          regenerates every *.gen.go; --check fails when one
//	                     is stale
//
// Each generated package has its oapi-codegen.yaml beside its *.gen.go.
// oapi-codegen is pinned as a tool in this module's go.mod, so
// `go tool oapi-codegen` runs the pinned version; generate.sh is the only
// way the code is (re)generated, and *.gen.go files are never edited by
// hand.
//
// Specs reference components.yaml with relative $refs
// ('./components.yaml#/components/...'), which [Load] resolves from the
// embedded copies. The generated packages do not embed their specs: that
// would make every service, the signer included, link kin-openapi.
//
// Errors on every API are RFC 9457 problem documents (components.Problem),
// the wire form of shared/errs: errs.WriteProblem answers them and
// errs.FromBody, or components.Problem's Err method, turns them back into
// an *errs.Error of the same kind on the client side.
package openapi

//go:generate ./generate.sh
