// The tenant scope of a message or an event: a tenant id derived from authenticated
// context, or an intentional global scope. Stored as the inbox's scope_kind/scope_id and
// the outbox's tenant_scope/tenant_id ("tenant" + id, or "global" + "").
export type Scope = { kind: 'tenant'; id: string } | { kind: 'global' };

/** The stored kind of `scope`, or null when it is neither form. */
export function scopeKindOf(scope: unknown): 'tenant' | 'global' | null {
  if (scope === null || typeof scope !== 'object') return null;
  const kind = (scope as { kind?: unknown }).kind;
  return kind === 'tenant' || kind === 'global' ? kind : null;
}

/** How operators read a scope: "global", or "tenant:" followed by the tenant id. */
export function scopeText(kind: string, id: string): string {
  return kind === 'global' ? 'global' : `tenant:${id}`;
}
