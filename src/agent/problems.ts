/**
 * Transitional: `ApiProblem` is a DomainError that also names the status and title its kind maps to
 * (src/plugins/app/errors.ts PROBLEM_STATUS decides what is sent). Throw `DomainError`
 * (src/agent/errors.ts) instead; this file goes once nothing imports it.
 */
import { DomainError, type ErrorDetails, type ErrorKind } from './errors.js';

export type ProblemKind = ErrorKind;
export type ProblemExtras = ErrorDetails;

export class ApiProblem extends DomainError {
  constructor(
    readonly status: number,
    kind: ErrorKind,
    readonly title: string,
    readonly detail: string,
    extras: ErrorDetails = {},
  ) {
    super(kind, detail, extras);
    this.name = 'ApiProblem';
  }
}

/** `validation` naming one field (as src/agent/errors.ts `invalid`, typed as an ApiProblem for older callers). */
export const invalid = (field: string, message: string): ApiProblem =>
  new ApiProblem(400, 'validation', 'Bad Request', `${field} ${message}`, { errors: [{ field, message }] });
