package otptest

import (
	"context"
	"sync"

	"smsgw/otp"
)

// AuditLog is an otp.AuditLog that keeps every row it is given.
type AuditLog struct {
	RecordFn    func(ctx context.Context, e otp.AuditEvent) error
	AcceptingFn func() error

	mu       sync.Mutex
	recorded []otp.AuditEvent
	finished []otp.AuditEvent
	noted    []otp.AuditEvent
}

func (l *AuditLog) Record(ctx context.Context, e otp.AuditEvent) error {
	l.mu.Lock()
	l.recorded = append(l.recorded, e)
	l.mu.Unlock()
	if l.RecordFn != nil {
		return l.RecordFn(ctx, e)
	}
	return nil
}

func (l *AuditLog) Finish(e otp.AuditEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finished = append(l.finished, e)
}

func (l *AuditLog) Note(e otp.AuditEvent, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.noted = append(l.noted, e)
}

func (l *AuditLog) Accepting() error {
	if l.AcceptingFn != nil {
		return l.AcceptingFn()
	}
	return nil
}

// Recorded is every row Record was given, failed ones included.
func (l *AuditLog) Recorded() []otp.AuditEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]otp.AuditEvent(nil), l.recorded...)
}

// Finished is every row Finish was given.
func (l *AuditLog) Finished() []otp.AuditEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]otp.AuditEvent(nil), l.finished...)
}

// Noted is every row Note was given.
func (l *AuditLog) Noted() []otp.AuditEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]otp.AuditEvent(nil), l.noted...)
}

// AuditReader is an otp.AuditReader.
type AuditReader struct {
	RecentFn func(ctx context.Context, phone string, limit int) ([]otp.AuditEvent, error)
}

func (r AuditReader) Recent(ctx context.Context, phone string, limit int) ([]otp.AuditEvent, error) {
	if r.RecentFn == nil {
		return nil, nil
	}
	return r.RecentFn(ctx, phone, limit)
}

// DeliveryLog is an otp.DeliveryLog.
type DeliveryLog struct {
	ReportFn func(ctx context.Context, r otp.DeliveryReport) error
}

func (l DeliveryLog) Report(ctx context.Context, r otp.DeliveryReport) error {
	if l.ReportFn == nil {
		return nil
	}
	return l.ReportFn(ctx, r)
}
