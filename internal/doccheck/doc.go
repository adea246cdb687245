// Package doccheck checks that every Go block of the repository's docs
// compiles against the code as it is: README.md and docs/*.md.
//
// Its test extracts each fenced block whose info string is go, turns it
// into a Go file of a package of its own, and builds and vets all of them
// in a temporary module that uses the repository's modules. A failure
// names the block by its Markdown file and line, with the compiler's
// message at the block's own lines.
//
// A block need not be a whole file. A block with a package clause is
// compiled as it is. Otherwise its import, func and type declarations stay
// at file level, and its other statements go, in order, into a function
// returning error, so that a block may return an error. The test imports
// the packages a block names and does not import itself (see importPaths),
// and declares at package level the variables the docs use without
// declaring them, such as g, ctx and mux (see conventional). A variable a
// block declares and then does not use is used, so that a block may show
// what a call returns.
//
// A block that is not Go is fenced with its own language (sh, yaml). A Go
// block that must stay a fragment that cannot compile is fenced as
// ```go fragment; the test skips it and lists it.
package doccheck
