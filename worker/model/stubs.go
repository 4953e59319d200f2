package model

import (
	"context"
	"errors"
)

type chatProvider struct{ h *httpClient }

func (p *chatProvider) Name() string { return p.h.name }
func (p *chatProvider) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	return nil, errors.New("not yet")
}

type anthropicProvider struct{ h *httpClient }

func (p *anthropicProvider) Name() string { return p.h.name }
func (p *anthropicProvider) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	return nil, errors.New("not yet")
}

// NewReplay is a stub.
func NewReplay(name, path string) (*Scripted, error) { return nil, errors.New("not yet") }
