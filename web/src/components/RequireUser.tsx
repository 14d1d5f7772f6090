import { useQuery } from '@tanstack/react-query';
import { Navigate, Outlet, useLocation } from 'react-router';
import { herald, isApiError } from '../api.ts';
import { Loading, PageError } from './states.tsx';

export function useMe() {
  return useQuery({ queryKey: ['me'], queryFn: () => herald.users.me(), staleTime: 60_000 });
}

/**
 * Pages behind the session: without one you go to the login page and come back afterwards. Only
 * on the first read: a session that ends later is the "log in again" dialog's (SessionExpired.tsx),
 * and the page stays.
 */
export function RequireUser() {
  const me = useMe();
  const location = useLocation();
  if (me.isPending) return <Loading />;
  if (isApiError(me.error, 401) && !me.data) {
    return <Navigate to={`/login?next=${encodeURIComponent(location.pathname + location.search)}`} replace />;
  }
  if (me.error && !me.data) return <PageError error={me.error} onRetry={() => void me.refetch()} />;
  return <Outlet />;
}
