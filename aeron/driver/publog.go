package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ibgo/ibgo/aeron/cnc"
	"github.com/ibgo/ibgo/aeron/logbuffer"
	"github.com/ibgo/ibgo/internal/shm"
)

// createPublicationLog creates publications/<regID>.logbuffer, the log of
// an IPC or network publication, and faults its pages in unless the log is
// sparse (the C driver does that for non-sparse logs, so that publishers do
// not take the page faults).
func (c *conductor) createPublicationLog(regID int64, termLength int, sparse bool) (*logbuffer.LogBuffer, string, error) {
	path := filepath.Join(c.cfg.Dir, "publications", strconv.FormatInt(regID, 10)+".logbuffer")
	log, err := c.createLog(path, termLength, sparse)
	return log, path, err
}

// createLog makes a publication's or an image's log file: refused with
// STORAGE_SPACE when the file system has no room (checkStorage); a log
// that is not sparse has its blocks reserved (a full /dev/shm later would
// be a SIGBUS) and its pages faulted in.
func (c *conductor) createLog(path string, termLength int, sparse bool) (*logbuffer.LogBuffer, error) {
	if err := c.checkStorage(termLength); err != nil {
		return nil, err
	}
	create := logbuffer.CreateAllocated
	if sparse {
		create = logbuffer.Create
	}
	log, err := create(path, int32(termLength), int32(c.cfg.FilePageSize))
	if err != nil {
		return nil, fail(cnc.ErrorCodeStorageSpace, "cannot create log %s: %v", path, err)
	}
	if !sparse {
		c.faultIn(log)
	}
	return log, nil
}

// faultIn touches every page of a log that is not sparse, so that
// publishers (or the receiver) do not take the page faults
// (aeron_map_raw_log with is_sparse false).
func (c *conductor) faultIn(log *logbuffer.LogBuffer) {
	b := log.Bytes()
	for i := 0; i < len(b); i += c.cfg.FilePageSize {
		b[i] = 0
	}
}

// freeLog unmaps and deletes a log. A failure counts in system counter
// 17 (failed attempts to free log buffers) and goes to the error log;
// unlike C, which retries the free at the next timer, ibgo has let go of
// the mapping either way, so a file left behind is reported once.
func (c *conductor) freeLog(log *logbuffer.LogBuffer, path string, length int64) {
	c.sys[sysBytesMapped].Add(-length)
	err := log.Close()
	if rmErr := os.Remove(path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	if err != nil {
		c.sys[sysFailedLogFrees].Add(1)
		c.recordError(cnc.ErrorCodeGenericError, fmt.Sprintf("free log %s: %v", path, err))
	}
}

// checkStorage refuses a new log the file system of the Aeron directory
// has no room for, with STORAGE_SPACE, and records a warning in the error
// log when the usable space is at or below the warning threshold
// (aeron_driver_context_run_storage_checks). Where the usable space cannot
// be measured (not Linux) there is no check.
func (c *conductor) checkStorage(termLength int) error {
	if !c.cfg.PerformStorageChecks {
		return nil
	}
	usable, err := c.usableSpace(c.cfg.Dir)
	if err != nil {
		return nil
	}
	logLength := uint64(logbuffer.ComputeLogLength(int64(termLength), int64(c.cfg.FilePageSize)))
	if usable < logLength {
		return fail(cnc.ErrorCodeStorageSpace, "insufficient usable storage for new log of length=%d usable=%d in %s", logLength, usable, c.cfg.Dir)
	}
	if int64(usable) <= c.cfg.LowFileStoreWarningThreshold {
		c.recordError(cnc.ErrorCodeStorageSpace, fmt.Sprintf("WARNING: space is running low: threshold=%d usable=%d in %s", c.cfg.LowFileStoreWarningThreshold, usable, c.cfg.Dir))
	}
	return nil
}

// initPublicationMetadata fills a new publication log's metadata as the C
// driver does (aeron_logbuffer_metadata_init) and sets its tails at the
// start position (LogBufferDescriptor.initialiseTailWithTermId: the active
// partition at the start, the others one and two terms behind). It returns
// the start position.
func (c *conductor) initPublicationMetadata(m *logbuffer.Metadata, regID int64, sessionID, streamID, initialTermID int32,
	termWindow int64, positionBitsToShift int, params ipcParams) int64 {
	m.SetCorrelationID(regID)
	m.SetInitialTermID(initialTermID)
	m.SetMTULength(int32(params.mtu))
	m.SetPublicationWindowLength(int32(termWindow))
	m.SetLingerTimeoutNs(params.linger)
	m.SetUntetheredWindowLimitTimeoutNs(params.untetheredWindowLimit)
	m.SetUntetheredRestingTimeoutNs(params.untetheredResting)
	m.SetSignalEOS(params.signalEOS)
	m.SetTether(true)
	m.SetSparse(params.sparse)
	m.SetSpiesSimulateConnection(params.ssc)
	m.SetEntityTag(params.entityTag)
	m.SetResponseCorrelationID(params.responseCorrelationID)
	m.SetIsResponse(params.isResponse)
	m.SetEndOfStreamPosition(math.MaxInt64)
	m.StoreDefaultDataHeader(sessionID, streamID, initialTermID)
	termID, termOffset := initialTermID, int32(0)
	if params.hasPosition {
		termID, termOffset = params.termID, params.termOff
	}
	termCount := termID - initialTermID
	m.SetRawTailOrdered(logbuffer.IndexByTermCount(int64(termCount)), logbuffer.PackTail(termID, termOffset))
	for i := int32(1); i < logbuffer.PartitionCount; i++ {
		m.InitialiseTailWithTermID(logbuffer.IndexByTermCount(int64(termCount)+int64(i)), termID+i-logbuffer.PartitionCount)
	}
	m.SetActiveTermCountOrdered(termCount)
	return logbuffer.ComputePosition(termID, termOffset, positionBitsToShift, initialTermID)
}

// storeFirstWord writes the first word of a cleaned range; a variable only
// so that a test can check it runs after the rest of the range is zero.
var storeFirstWord = shm.StoreInt64

// cleanLog zeroes log from cleanPosition up to position, term by term, so
// that a reused partition never shows stale frames, and returns the new
// clean position (aeron_ipc_publication_clean_buffer,
// aeron_network_publication_clean_buffer, aeron_publication_image_clean_buffer_to).
// Of each range the first word, which holds the frame length readers
// (subscribers, spies, the sender) look at, is zeroed last and with
// release ordering: a reader that sees it zero sees the rest zero too.
// Positions are frame aligned, so a range is at least one frame long.
func cleanLog(log *logbuffer.LogBuffer, cleanPosition, position, termLength int64, positionBitsToShift int) int64 {
	for position > cleanPosition {
		term := log.Term(logbuffer.IndexByPosition(cleanPosition, positionBitsToShift))
		off := cleanPosition & (termLength - 1)
		n := min(position-cleanPosition, termLength-off)
		if n > 8 {
			clear(term[off+8 : off+n])
		}
		storeFirstWord(term, int(off), 0)
		cleanPosition += n
	}
	return cleanPosition
}
