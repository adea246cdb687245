// Package otelguard exports a slidegate.Guard's statistics as OpenTelemetry metrics.
package otelguard
