import { useParams } from 'react-router';

/** The project id from the URL (/p/:projectId/...). */
export function useProjectId(): string {
  const { projectId } = useParams();
  if (!projectId) throw new Error('not on a project page');
  return projectId;
}

export const formatDate = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');
export const formatNumber = (n: number) => n.toLocaleString();
