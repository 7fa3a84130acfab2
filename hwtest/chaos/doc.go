// Package chaos is ibgo's fault-injection suite and soak (issue 33). Its
// tests run in the soft-RoCE VM only (`make chaos-vm`, `make soak-vm`; the
// one- and two-guest chaos tests are also part of `make test`):
//
//   - each scenario runs a stream of sequence-numbered messages between two
//     `ibgo driver` processes over aeron:udp, aeron:ib UD and aeron:ib RC,
//     injects one fault (a link down, netem, the RDMA device removed, a
//     driver or a client killed with SIGKILL, a resource limit), and prints
//     a row: offered, delivered, lost, duplicated, out of order, the longest
//     stall, and what the drivers' error logs and counters said;
//   - a reliable stream must show lost = duplicated = out-of-order = 0; where
//     loss is the correct outcome (a driver that is gone), the row says how
//     it was made visible (the client's error, the image going, a counter);
//   - the soak runs publications and subscriptions of every medium coming
//     and going for IBGO_SOAK_DURATION and samples the driver's RSS,
//     goroutines, threads, fds and the kernel's RDMA object counts each
//     interval.
//
// docs/reliability.md holds the tables and the commands.
package chaos
