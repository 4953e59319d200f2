package workitems

// An item carries its pin; package config makes it (PinFor) and compares it (Incompatible).

// ConfigPin is what an item records of the config it was created under: the config and
// template versions, and the template settings an item cannot outlive (see config.Incompatible). config.PinFor makes it.
type ConfigPin struct {
	Config   string   `json:"config"`
	Template string   `json:"template"`
	LoopKind LoopKind `json:"loop_kind"`
	Repo     string   `json:"repo,omitempty"`
	// DeliverMode and DeliverRepo say where the item's change goes.
	DeliverMode DeliveryMode `json:"deliver_mode,omitempty"`
	DeliverRepo string       `json:"deliver_repo,omitempty"`
}

// ConfigChangeReason is why an item cannot go on under the config in force.
type ConfigChangeReason string

// The reasons an item of a changed config is escalated (its escalation's reason).
const (
	// ConfigTemplateRemoved: the item's template is not in the config any more.
	ConfigTemplateRemoved ConfigChangeReason = "template_removed"
	// ConfigTemplateIncompatible: the template changed in a way the item's attempts so far do not
	// carry over to (see config.Incompatible).
	ConfigTemplateIncompatible ConfigChangeReason = "template_incompatible"
)

// AllConfigChangeReasons lists the reasons.
func AllConfigChangeReasons() []ConfigChangeReason {
	return []ConfigChangeReason{ConfigTemplateRemoved, ConfigTemplateIncompatible}
}
