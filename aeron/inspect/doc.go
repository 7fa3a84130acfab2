// Package inspect holds the logic behind ibgo's Aeron inspection commands:
// Decode prints every Aeron frame of a packet capture, one line each; Stat,
// Errors and Loss print a driver's CnC counters, error log and loss report
// in the format of Aeron's AeronStat (aeron_stat.c), ErrorStat
// (error_stat.c) and LossStat.
//
// The commands in cmd/ibgo only parse flags and call these functions, so
// the output is tested here against the reference vectors.
package inspect
