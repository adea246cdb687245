// Package hooks lets the packages of this module reach what the guard does
// not export to its users. The root package sets each hook when it is
// initialized, before any importer runs.
package hooks

// ReportRefused records a RulesRefused event on g, a *slidegate.Guard, for
// rules from source that were refused before they reached SetRules,
// because err found problems in them. A nil err records nothing.
// Package rulefile reports so the documents it refuses.
var ReportRefused func(g any, source string, err error)
