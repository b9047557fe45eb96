package policy

import (
	"github.com/ethereum/go-ethereum/common"
)

// grantCall is a call that gives a third party power over a signer's
// tokens, debt or positions: an allowance, an operator, a permit, a
// delegation. Sent to a contract the policy does not declare as a token,
// an allow rule permits it only for the spenders its erc20_spenders list,
// and only in canonical encoding; a declared token's own calls are read by
// its standard instead (tokens.go).
type grantCall struct {
	abiCall
	// grantee picks the spender or operator out of the decoded arguments.
	grantee func(args []abiValue) common.Address
}

func firstArg(args []abiValue) common.Address  { return args[0].address() }
func secondArg(args []abiValue) common.Address { return args[1].address() }

// permit2Spender is the spender field of Permit2's PermitSingle and
// PermitBatch, the second argument.
func permit2Spender(args []abiValue) common.Address { return args[1].items[1].address() }

// grantCallList is every allowance-granting call policy knows. Selectors
// are checked against keccak256 of their signatures by a test. A call
// missing here is not decoded, so a rule that lets call data through to a
// contract lets it through unchecked: keep the list complete.
var grantCallList = []grantCall{
	// ERC-20 and ERC-721.
	{newCall("approve(address,uint256)", [4]byte{0x09, 0x5e, 0xa7, 0xb3}), firstArg},
	// OpenZeppelin ERC-20, and the older Zeppelin StandardToken name.
	{newCall("increaseAllowance(address,uint256)", [4]byte{0x39, 0x50, 0x93, 0x51}), firstArg},
	{newCall("increaseApproval(address,uint256)", [4]byte{0xd7, 0x3d, 0xd6, 0x23}), firstArg},
	// ERC-721 and ERC-1155: a whole collection to an operator.
	{newCall("setApprovalForAll(address,bool)", [4]byte{0xa2, 0x2c, 0xb4, 0x65}), firstArg},
	// ERC-777 operators.
	{newCall("authorizeOperator(address)", [4]byte{0x95, 0x9b, 0x8c, 0x3f}), firstArg},
	// ERC-1363 (and MiniMe, ERC-827): approve, then call the spender.
	{newCall("approveAndCall(address,uint256,bytes)", [4]byte{0xca, 0xe9, 0xca, 0x51}), firstArg},
	{newCall("approveAndCall(address,uint256)", [4]byte{0x31, 0x77, 0x02, 0x9f}), firstArg},
	// EIP-2612 and DAI's permit, submitted by the signer: owner, spender, ...
	{newCall("permit(address,address,uint256,uint256,uint8,bytes32,bytes32)", [4]byte{0xd5, 0x05, 0xac, 0xcf}), secondArg},
	{newCall("permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)", [4]byte{0x8f, 0xcb, 0xaf, 0x0c}), secondArg},
	// ERC-4494 permit of one NFT (Uniswap v3 positions): spender, token id, ...
	{newCall("permit(address,uint256,uint256,uint8,bytes32,bytes32)", [4]byte{0x7a, 0xc2, 0xff, 0x7b}), firstArg},
	// Permit2: approve(token, spender, amount, expiration), and permits
	// of one or many tokens.
	{newCall("approve(address,address,uint160,uint48)", [4]byte{0x87, 0x51, 0x7c, 0x45}), secondArg},
	{newCall("permit(address,((address,uint160,uint48,uint48),address,uint256),bytes)", [4]byte{0x2b, 0x67, 0xb5, 0x70}), permit2Spender},
	{newCall("permit(address,((address,uint160,uint48,uint48)[],address,uint256),bytes)", [4]byte{0x2a, 0x2d, 0x80, 0xd1}), permit2Spender},
	// ERC-6909: approve(spender, id, amount) and operators.
	{newCall("approve(address,uint256,uint256)", [4]byte{0x42, 0x6a, 0x84, 0x93}), firstArg},
	{newCall("setOperator(address,bool)", [4]byte{0x55, 0x8a, 0x72, 0x97}), firstArg},
	// Lending: Aave credit delegation (the delegatee borrows on the
	// signer's collateral), Compound III managers, Morpho Blue
	// authorizations, Maker's hope.
	{newCall("approveDelegation(address,uint256)", [4]byte{0xc0, 0x4a, 0x8a, 0x10}), firstArg},
	{newCall("allow(address,bool)", [4]byte{0x11, 0x04, 0x96, 0xe5}), firstArg},
	{newCall("setAuthorization(address,bool)", [4]byte{0xee, 0xce, 0xa0, 0x00}), firstArg},
	{newCall("hope(address)", [4]byte{0xa3, 0xb2, 0x2f, 0xc4}), firstArg},
}

// grantCalls indexes grantCallList by selector.
var grantCalls = func() map[[4]byte]*grantCall {
	m := make(map[[4]byte]*grantCall, len(grantCallList))
	for i := range grantCallList {
		g := &grantCallList[i]
		if m[g.selector] != nil {
			panic("policy: two allowance-granting calls with selector " + common.Bytes2Hex(g.selector[:]))
		}
		m[g.selector] = g
	}
	return m
}()
