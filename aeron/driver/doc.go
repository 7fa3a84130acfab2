// Package driver is ibgo's Aeron media driver: the conductor agent that
// serves clients through the CnC file (aeron_driver_conductor.c), IPC
// publications and images, client liveness, system counters, the distinct
// error log and the loss report, with files laid out as Aeron's C driver
// 1.48 lays them out so that Aeron's own C, C++ and Java clients can use
// it.
//
// Network media plug in through Media and Transport (media.go), the
// equivalent of the C driver's media-binding function table; without one,
// aeron:udp and aeron:ib channels are refused with INVALID_CHANNEL.
//
// Start runs a driver in-process (an embedded driver); `ibgo driver` runs
// one in the foreground. Configuration comes from Aeron's AERON_*
// environment variables (ConfigFromEnv) with the C driver's defaults.
package driver
