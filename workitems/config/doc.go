// Package config owns the configuration file, outerloop.yaml: its types (Config, Template and
// their sections: providers, forges, deliver, done_check, sandbox, notify, triggers, fleet,
// retention, waits), reading it (LoadConfig, ParseConfig and their With forms, which reject
// unknown keys), its defaults, its validation against the registered kinds (Kinds), its
// versions and the pins items are made with (PinFor, Incompatible), the operator files a
// template's commands name, and template overlays (EffectiveTemplate).
//
// It is apart from package workitems so that the item's types, states and transitions do not
// carry the file that configures them: it imports workitems for the vocabularies its fields
// take (LoopKind, DeliveryMode, BuildCacheScope, NotifyEvent, ...) and for the item's Budget,
// Duration, State, Strategy and ConfigPin; workitems imports nothing of it.
package config
