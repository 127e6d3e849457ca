/**
 * An OAuth 2 error answer (RFC 6749 5.2): `error` is one of the registered codes, `description`
 * says what was wrong. invalid_client is 401; the others are 400 (429 for too many attempts).
 */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'invalid_scope'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'access_denied'
  | 'slow_down';

export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status: number = error === 'invalid_client' ? 401 : error === 'slow_down' ? 429 : 400,
  ) {
    super(description);
  }

  body(): { error: string; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}
