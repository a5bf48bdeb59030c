package latchkeyotel

import "go.opentelemetry.io/otel/attribute"

// The attribute keys, each in one place.
const (
	attrDBSystem      = attribute.Key("db.system.name")
	attrServerAddress = attribute.Key("server.address")
	attrErrorType     = attribute.Key("error.type")

	attrBackend    = attribute.Key("latchkey.lock.backend")
	attrLockOut    = attribute.Key("latchkey.lock.outcome")
	attrWaited     = attribute.Key("latchkey.lock.wait.duration")
	attrAttempts   = attribute.Key("latchkey.lock.attempts")
	attrHeld       = attribute.Key("latchkey.lock.hold.duration")
	attrLeaseEnd   = attribute.Key("latchkey.lock.end")
	attrLossReason = attribute.Key("latchkey.lock.loss_reason")
	attrKeyHash    = attribute.Key("latchkey.lock.key_hash")

	attrHandler     = attribute.Key("latchkey.idem.handler")
	attrIdemOut     = attribute.Key("latchkey.idem.outcome")
	attrIdemStatus  = attribute.Key("http.response.status_code")
	attrReplayWait  = attribute.Key("latchkey.idem.duration")
	attrReplayAge   = attribute.Key("latchkey.idem.replay_age")
	attrConsumer    = attribute.Key("latchkey.dedup.consumer")
	attrDedupOut    = attribute.Key("latchkey.dedup.outcome")
	attrFenceGuard  = attribute.Key("latchkey.fence.guard")
	attrFenceOp     = attribute.Key("latchkey.fence.op")
	attrStateTable  = attribute.Key("latchkey.state.table")
	attrStateReason = attribute.Key("latchkey.state.reason")
	attrStateTo     = attribute.Key("latchkey.state.to")
)
