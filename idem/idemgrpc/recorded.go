package idemgrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// record is an answer as kept in the store, JSON-encoded. Exactly one of
// Message (with Type) and Status is set, unless Omitted.
type record struct {
	Version int         `json:"grpc"`
	Type    string      `json:"t,omitempty"` // the response message's full name
	Message []byte      `json:"m,omitempty"` // its deterministic encoding
	Status  []byte      `json:"s,omitempty"` // a google.rpc.Status, encoded
	Header  metadata.MD `json:"h,omitempty"`
	Trailer metadata.MD `json:"tr,omitempty"`
	Omitted bool        `json:"o,omitempty"` // the answer was over the cap
	At      int64       `json:"at,omitempty"`
}

const recordVersion = 1

var deterministic = proto.MarshalOptions{Deterministic: true}

// errNotProto is the error of a request or response that is not a protocol
// buffer message (a server with a codec of its own).
var errNotProto = errors.New("idemgrpc: not a protocol buffer message")

// encodeAnswer encodes the handler's answer, or, when it is over max bytes,
// a record that says it was not retained.
func encodeAnswer(resp any, st *status.Status, md *capturedMD, max int, now time.Time) ([]byte, error) {
	r := record{Version: recordVersion, At: now.UnixMilli()}
	if md != nil {
		r.Header, r.Trailer = md.snapshot()
	}
	if st != nil {
		b, err := proto.Marshal(st.Proto())
		if err != nil {
			return nil, fmt.Errorf("idemgrpc: encoding status: %w", err)
		}
		r.Status = b
	} else {
		m, ok := resp.(proto.Message)
		if !ok {
			return nil, fmt.Errorf("%w: response of type %T", errNotProto, resp)
		}
		b, err := deterministic.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("idemgrpc: encoding response: %w", err)
		}
		r.Type, r.Message = string(m.ProtoReflect().Descriptor().FullName()), b
	}
	out, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("idemgrpc: encoding record: %w", err)
	}
	if len(out) > max {
		return omittedRecord(now), nil
	}
	return out, nil
}

// omittedRecord is the record of an answer that was given but not kept.
func omittedRecord(now time.Time) []byte {
	b, _ := json.Marshal(record{Version: recordVersion, Omitted: true, At: now.UnixMilli()}) // no value that can fail
	return b
}

// decodeRecord reads a record encodeAnswer wrote.
func decodeRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.Version != recordVersion {
		return record{}, fmt.Errorf("idemgrpc: the stored record is not one this package wrote (version %d): %v", r.Version, err)
	}
	return r, nil
}

// answer is the response message, or the status, the record replays.
func (r record) answer() (any, *status.Status, error) {
	if r.Status != nil {
		var s spb.Status
		if err := proto.Unmarshal(r.Status, &s); err != nil {
			return nil, nil, fmt.Errorf("idemgrpc: decoding stored status: %w", err)
		}
		return nil, status.FromProto(&s), nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(r.Type))
	if err != nil {
		return nil, nil, fmt.Errorf("idemgrpc: stored response type %q: %w", r.Type, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(r.Message, m); err != nil {
		return nil, nil, fmt.Errorf("idemgrpc: decoding stored response: %w", err)
	}
	return m, nil, nil
}

// age is how long ago the record was made, never below 0; 0 when unknown.
func (r record) age(now time.Time) time.Duration {
	if r.At == 0 {
		return 0
	}
	return max(now.Sub(time.UnixMilli(r.At)), 0)
}
