// Package uri parses, validates and formats Aeron channel URIs:
// aeron:udp, aeron:ipc and ibgo's aeron:ib, with the aeron-spy: prefix.
//
//	aeron:udp?endpoint=localhost:20121|term-length=64k|mtu=8k
//	aeron:ipc?term-length=64m
//	aeron:ib?endpoint=192.168.1.10:40456|ib-qp=rc
//
// The grammar follows aeron_uri_parse (aeron-client/src/main/c/uri/aeron_uri.c):
// "aeron:" media ["?" key "=" value ("|" key "=" value)*], keys and values
// not empty, at most 4095 characters. Every key the Aeron C driver
// understands is validated with the driver's rules (mtu a multiple of 32 in
// 33..65504, term-length a power of two in 64 KiB..1 GiB, …), plus ib-qp=ud|rc
// for aeron:ib. A failed rule is an *Error that names the key, the value and
// the rule. Keys the media does not know are kept, in order, and listed by
// Unknown, as Aeron keeps them in its additional params.
//
// Where Aeron's two parsers disagree this package refuses the input instead
// of guessing: a duplicate key (the C driver takes the first value, the Java
// client the last) and a key without a value (the C parser drops it, Java
// fails) are errors.
package uri
