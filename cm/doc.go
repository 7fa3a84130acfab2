// Package cm is the RDMA connection manager over /dev/infiniband/rdma_cm
// (the kernel's ucma write() ABI, rdma/rdma_user_cm.h), in pure Go: address
// and route resolution, listen/connect/accept/reject with private data and
// connection parameters, disconnect, QPs driven through their states from
// INIT_QP_ATTR exactly as librdmacm does, options, and migrating ids
// between event channels. IPv4 and IPv6 (and AF_IB addresses where the
// kernel takes them).
//
// Two levels:
//
//   - Dial and Listen/Listener.Accept return a *Conn: a connected RC QP
//     (RTS), its CQ, and the id, with contexts for every wait. Hooks
//     (Dialer.BeforeConnect, ListenConfig.BeforeAccept) post receives before
//     the peer can send. Failures are *Error values whose Kind is one of
//     ErrUnreachable, ErrRouteFailed, ErrRefused (with the REJ reason and the
//     peer's private data), ErrTimeout, ErrDisconnected, ErrPortInUse,
//     ErrClosed; errors.Is matches the kind and the cause (errno, context).
//   - Channel and ID are librdmacm's event channel and rdma_cm_id, for
//     programs that need every event: CreateID, Bind, ResolveAddr,
//     ResolveRoute, Listen, Connect, Accept, Reject, Disconnect, Establish,
//     CreateQP, InitQPAttr, ModifyQP, Query*, Set* options, Notify, Migrate;
//     GetEvent/WaitEvent return the id's events, fully decoded (Event: the
//     conn parameters for RC ids, the UD parameters — remote QPN, Q_Key,
//     address — for UD ids, ECE).
//
// Each Channel has one goroutine that waits for the kernel's events on the
// Go runtime poller (GET_EVENT is a write(2) that answers EAGAIN until the
// file is readable; no thread blocks in it, nothing spins) and queues each on
// its id, found by its uid in one process-wide registry: uids are never 0
// and never reused, so a late event of a destroyed id is dropped, and an id
// keeps its queue when it migrates. A connection request that arrives for a
// listener already closed is rejected at once.
//
// The kernel never touches a user QP; this package does what librdmacm does
// around it (cma.c): INIT at creation (UD: on to RTS), on CONNECT_RESPONSE
// INIT again (the access-flag refresh), RTR and RTS then the RTU (ACCEPT
// with valid=0), on accept INIT/RTR/RTS with responder resources and
// initiator depth clamped to the device before the REP, ERR on REJECTED and
// before DISCONNECT. QP attribute masks from the kernel are limited to the
// bits MODIFY_QP accepts (0x1FFFFF).
//
// UD service-id resolution (SIDR) and multicast build on the same ID and
// Event types in separate files.
package cm
