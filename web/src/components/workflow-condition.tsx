import { useQuery } from '@tanstack/react-query';
import { herald } from '../api.ts';
import { useProjectId } from '../hooks.ts';
import { EMAIL_ACTIVITIES, type FieldCatalog, kindByType } from './ConditionBuilder.tsx';

/**
 * What a CONDITION step's builder offers: GET /workflows/fields (contact fields, and `event.<key>`
 * keys of the execution's context with their types), the project's tracked events (activity
 * tests), email activity and segments, as in the segment builder.
 */
export function useWorkflowFieldCatalog(workflowId: string): FieldCatalog {
  const projectId = useProjectId();
  const fields = useQuery({
    queryKey: [projectId, 'workflows', workflowId, 'fields'],
    queryFn: () => herald.workflows.fields({ workflowId }),
  });
  const events = useQuery({ queryKey: [projectId, 'event-names'], queryFn: () => herald.events.names() });
  const segments = useQuery({ queryKey: [projectId, 'segments'], queryFn: () => herald.segments.list() });
  const all = fields.data?.fields ?? [{ field: 'email', type: 'string' as const, source: 'contact' as const, operators: [] }];
  const types = new Map(all.map((f) => [f.field, f.type]));
  const kindOf = kindByType(types);
  const eventNames = (events.data?.names ?? []).map((n) => n.name).filter((n) => !n.startsWith('email.'));
  return {
    kindOf,
    // Suggested values are asked only once the types are known (ConditionBuilder's useSeenValues).
    loaded: !fields.isPending,
    options: [
      { group: 'Contact', items: all.filter((f) => f.source === 'contact').map((f) => ({ value: f.field, label: `${f.field} (${f.type})` })) },
      {
        group: 'Triggering event data',
        items: all.filter((f) => f.source === 'event').map((f) => ({ value: f.field, label: `${f.field} (${f.type}, from the event)` })),
      },
      {
        group: 'Events the contact tracked',
        items: eventNames.filter((n) => !types.has(`event.${n}`)).map((n) => ({ value: `event.${n}`, label: `event: ${n}` })),
      },
      { group: 'Email activity', items: EMAIL_ACTIVITIES.map((a) => ({ value: `email.${a}`, label: `email ${a}` })) },
      { group: 'Segments', items: (segments.data ?? []).map((s) => ({ value: `segment.${s.id}`, label: `in segment: ${s.name}` })) },
    ].filter((g) => g.items.length > 0),
  };
}
